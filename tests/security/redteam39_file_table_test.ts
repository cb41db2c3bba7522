/**
 * Red team 39: an agent holds open files (`struct file`) far past its limits, in the host-wide
 * file table (`fs.file-max`) that every process shares.
 *
 * The sandbox bounds an agent's descriptors (`openFiles`, RLIMIT_NOFILE, per process) and its
 * processes (`processes`, RLIMIT_NPROC and `pids.max`), so its share of the host's file table
 * looks bounded by processes x openFiles. It is not: a file mapped with mmap(2) keeps its open
 * file description alive after its descriptor is closed, and a process may hold
 * `vm.max_map_count` (65,530) mappings. Open, map one page, close, repeat: each round costs one
 * `struct file` and one VMA (~400 bytes, charged to the agent's memory cgroup) and no
 * descriptor. The file table's size is a host-wide count, not memory: once `nr_files` reaches
 * `fs.file-max`, every open(2), socket(2), pipe(2), accept(2) of every process without
 * CAP_SYS_ADMIN fails with ENFILE (sibling agents, whose runners then cannot even accept their
 * relay connections; the operator's and every other user's processes). Root is exempt.
 *
 * First run (this machine: 24 GB RAM, `fs.file-max` 2,466,246, kernel 6.18, cgroup v1): an
 * agent spawned with `--limit processes=64 --limit openFiles=256` (at most 16,384 descriptors)
 * held 720,000 open files (29 % of the host's table) within a second, its memory group charged
 * ~300 MB for them. With the default limits (256 processes, 1 GiB) the same loop is bounded only
 * by memory: ~2.5 M files fit in 1 GiB, which is the whole of `fs.file-max` here; and since
 * file-max scales with RAM (about RAM / 10 KiB) while the cost is ~400 bytes a file, one default
 * agent fills the table of any host with less than ~24 GB, and a few agents (or one spawned with
 * a larger memory limit) fill it anywhere. The test stops at a fraction so as not to take the
 * table from the machine it runs on.
 *
 * The defence (lib/manager/sandbox/file_table.ts): each open file is charged to the memory
 * cgroup of the process that opened it, so what makes the table a shared pool is only its cap;
 * a root supervisor lifts `fs.file-max` to the kernel's maximum (as systemd does at boot), and
 * the agent's memory limit is what bounds it. Passes when the agent's files are a negligible
 * share (under 1 %) of the host's table as the supervisor left it. About 40 s.
 */
import assert from "node:assert/strict";
import { rt39Stack, sleep } from "./rt39_fixtures/stack.ts";

const PROCS = 64;
const OPEN_FILES = 256;
/** Children the fixture forks, and files each maps: 720,000 in all, ~300 MB charged. */
const KIDS = 12;
const MAPS = 60_000;

/** The memory cgroup's usage of the process running `needle`, if found (cgroup v1 or v2). */
function agentMemory(needle: string): number | undefined {
  for (const e of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(e.name)) continue;
    try {
      const cmd = Deno.readTextFileSync(`/proc/${e.name}/cmdline`);
      if (!cmd.includes(needle) || cmd.includes("agent.ts")) continue;
      const cg = Deno.readTextFileSync(`/proc/${e.name}/cgroup`).split("\n");
      const v1 = cg.find((l) => /:memory:/.test(l))?.split(":")[2];
      if (v1) {
        return Number(Deno.readTextFileSync(`/sys/fs/cgroup/memory${v1}/memory.usage_in_bytes`));
      }
      const v2 = cg.find((l) => l.startsWith("0::"))?.slice(3);
      if (v2) return Number(Deno.readTextFileSync(`/sys/fs/cgroup${v2}/memory.current`));
    } catch {
      // Gone.
    }
  }
  return undefined;
}

function fileNr(): number {
  return Number(Deno.readTextFileSync("/proc/sys/fs/file-nr").split(/\s+/)[0]);
}

Deno.test({
  name:
    "red team 39 - an agent cannot take a share of the host's file table by mapping files past its descriptor limits (run only with COTAL_SLOW_TESTS=1: 720,000 files pinned for 40 s; tests/manager/file_table_test.ts checks the defence in the suite)",
  ignore: !Deno.env.get("COTAL_SLOW_TESTS"),
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const s = await rt39Stack("files", ["filepin.py"]);
    try {
      const up = await s.cotal(["up", "--port", s.port, "--detach"], 170_000);
      assert.equal(up.code, 0, up.out);
      await sleep(2_000);
      const before = fileNr();
      const m = await s.spawnAgent(
        "mallory",
        "filepin.py",
        [String(KIDS), String(MAPS), "8"],
        false,
        [
          ...["--limit", `processes=${PROCS}`, "--limit", `openFiles=${OPEN_FILES}`],
          ...["--restarts", "0"],
        ],
      );
      assert.equal(m.code, 0, m.out);
      let peak = before;
      let memAtPeak = 0;
      const end = Date.now() + 25_000;
      while (Date.now() < end) {
        await sleep(250);
        const n = fileNr();
        if (n > peak) {
          peak = n;
          memAtPeak = agentMemory("filepin.py") ?? 0;
        }
        const log = await Deno.readTextFile(`${s.work}/a/filepin.log`).catch(() => "");
        if (/done/.test(log)) break;
      }
      await sleep(1_000);
      const memAfter = agentMemory("filepin.py") ?? 0;
      console.log(
        `agent memory group: ${(memAtPeak / 2 ** 20).toFixed(0)} MiB at the peak, ${
          (memAfter / 2 ** 20).toFixed(0)
        } MiB once its children exited: ~${
          ((memAtPeak - memAfter) / Math.max(1, peak - fileNr())).toFixed(0)
        } bytes charged per held file`,
      );
      const log = await Deno.readTextFile(`${s.work}/a/filepin.log`).catch(() => "");
      console.log(log.trim());
      const max = Number(Deno.readTextFileSync("/proc/sys/fs/file-nr").split(/\s+/)[2]);
      const held = peak - before;
      console.log(
        `host file table: ${before} before, peak ${peak} (+${held}, ${
          (100 * held / max).toFixed(1)
        } % of fs.file-max ${max}); the agent's limits allow ${PROCS * OPEN_FILES} descriptors`,
      );
      assert.ok(
        held / max < 0.01,
        `the agent held ${held} open files, ${(100 * held / max).toFixed(1)} % of the host's table`,
      );
    } finally {
      await s.cotal(["despawn", "mallory"], 90_000).catch(() => {});
      await s.close();
    }
  },
});
