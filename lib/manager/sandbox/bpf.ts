/**
 * The few `bpf(2)` steps the supervisor takes to guard an agent's cgroup: create an array map,
 * load a program from raw instructions, attach it to a group. Programs are written here as
 * eBPF bytes (no compiler, no object files): each is a handful of instructions.
 *
 * @module
 */
import { bpf } from "./libc.ts";

const BPF_MAP_CREATE = 0;
const BPF_PROG_LOAD = 5;
const BPF_PROG_ATTACH = 8;
const BPF_MAP_TYPE_ARRAY = 2;

/** `BPF_PROG_TYPE_CGROUP_SOCK`: socket creation and release. */
export const PROG_CGROUP_SOCK = 9;
/** `BPF_PROG_TYPE_CGROUP_SOCK_ADDR`: bind, connect and sendmsg with their address. */
export const PROG_CGROUP_SOCK_ADDR = 18;

/** `union bpf_attr` is larger; the kernel takes any size up to its own and zero past ours. */
const ATTR_SIZE = 128;
const LICENSE = new TextEncoder().encode("GPL\0");

function address(buf: Uint8Array): bigint {
  return BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(buf)));
}

/** Loads a program; returns its descriptor. Throws `libc_failed` naming `what`. */
export function loadProgram(
  progType: number,
  insns: Uint8Array,
  attachType: number,
  what: string,
): number {
  const attr = new Uint8Array(ATTR_SIZE);
  const v = new DataView(attr.buffer);
  v.setUint32(0, progType, true); // prog_type
  v.setUint32(4, insns.length / 8, true); // insn_cnt
  v.setBigUint64(8, address(insns), true); // insns
  v.setBigUint64(16, address(LICENSE), true); // license
  v.setUint32(68, attachType, true); // expected_attach_type
  return bpf(BPF_PROG_LOAD, attr, `bpf(BPF_PROG_LOAD) of ${what}`);
}

/** Attaches a loaded program to the cgroup open at `group`. Throws `libc_failed`. */
export function attachProgram(group: number, prog: number, type: number, what: string): void {
  const attr = new Uint8Array(ATTR_SIZE);
  const v = new DataView(attr.buffer);
  v.setUint32(0, group, true); // target_fd
  v.setUint32(4, prog, true); // attach_bpf_fd
  v.setUint32(8, type, true); // attach_type
  bpf(BPF_PROG_ATTACH, attr, `bpf(BPF_PROG_ATTACH) of ${what}`);
}

/** Creates a one-slot array map of `valueSize` zeroed bytes (key 0); returns its descriptor. */
export function createSlotMap(valueSize: number, what: string): number {
  const map = new Uint8Array(ATTR_SIZE);
  const mv = new DataView(map.buffer);
  mv.setUint32(0, BPF_MAP_TYPE_ARRAY, true); // map_type
  mv.setUint32(4, 4, true); // key_size
  mv.setUint32(8, valueSize, true); // value_size
  mv.setUint32(12, 1, true); // max_entries
  return bpf(BPF_MAP_CREATE, map, `bpf(BPF_MAP_CREATE) of ${what}`);
}

/** One eBPF instruction: opcode, registers, offset, immediate (little-endian, as x86_64/arm64). */
export function insn(code: number, dst: number, src: number, off: number, imm: number): number[] {
  const b = new Uint8Array(8);
  const v = new DataView(b.buffer);
  b[0] = code;
  b[1] = (src << 4) | dst;
  v.setInt16(2, off, true);
  v.setInt32(4, imm, true);
  return [...b];
}

/** r0 = the map's one slot (key 0), or 0. Clobbers r1 to r5. */
export function slot(mapFd: number): number[] {
  return [
    ...insn(0xbf, 2, 10, 0, 0), // r2 = r10
    ...insn(0x07, 2, 0, 0, -4), // r2 += -4
    ...insn(0x62, 10, 0, -4, 0), // *(u32 *)(r10 - 4) = 0: the key
    ...insn(0x18, 1, 1, 0, mapFd), // r1 = the map (a 16-byte load, pseudo map fd)
    ...insn(0x00, 0, 0, 0, 0),
    ...insn(0x85, 0, 0, 0, 1), // call bpf_map_lookup_elem
  ];
}

/** An instruction, a label, or a jump to a label (resolved once every label's place is known). */
export type Item = number[] | { label: string } | {
  code: number;
  dst: number;
  imm: number;
  to: string;
};

/** The program's bytes, with each jump's offset counted to its label. */
export function assemble(items: Item[]): Uint8Array {
  const at = new Map<string, number>();
  let pc = 0;
  for (const it of items) {
    if (Array.isArray(it)) pc += it.length / 8;
    else if ("label" in it) at.set(it.label, pc);
    else pc += 1;
  }
  const out: number[] = [];
  pc = 0;
  for (const it of items) {
    if (Array.isArray(it)) {
      out.push(...it);
      pc += it.length / 8;
    } else if (!("label" in it)) {
      const target = at.get(it.to);
      if (target === undefined) throw new Error(`no label ${it.to}`);
      out.push(...insn(it.code, it.dst, 0, target - pc - 1, it.imm));
      pc += 1;
    }
  }
  return new Uint8Array(out);
}

export const JA = 0x05; // goto
export const JEQ = 0x15; // if dst == imm (64-bit)
export const JNE = 0x55; // if dst != imm (64-bit)
export const JEQ32 = 0x16; // if (u32)dst == (u32)imm
export const JNE32 = 0x56; // if (u32)dst != (u32)imm
export const JGE = 0x35; // if dst >= imm (unsigned)
export const JGT = 0x25; // if dst > imm (unsigned)
export const JLT = 0xa5; // if dst < imm (unsigned)
export const jump = (code: number, dst: number, imm: number, to: string): Item => ({
  code,
  dst,
  imm,
  to,
});
export const label = (name: string): Item => ({ label: name });
export const exitWith = (verdict: 0 | 1): Item[] => [
  insn(0xb7, 0, 0, 0, verdict), // r0 = verdict
  insn(0x95, 0, 0, 0, 0), // exit
];
