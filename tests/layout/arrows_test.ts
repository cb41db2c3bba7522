/**
 * The house's dependency direction, judged by `deno info`'s module graph: every area of `lib/`
 * imports only areas below it (README, "Layout"), and no module graph cycle is made of value
 * imports. Type-only references inside an area are allowed (they vanish at run time). An area
 * with a `mod.ts` is entered through it (the nats.js rule: siblings inside an area import each
 * other's modules, everyone else imports the area's `mod.ts`).
 */
import assert from "node:assert/strict";
import { fileURLToPath as fromFileUrl, pathToFileURL } from "node:url";

const ROOT = new URL("../../", import.meta.url);
const rootPath = fromFileUrl(ROOT);

/**
 * Each area's rank: an import must go to a lower rank. Equal ranks are siblings that must not
 * import each other (`delivery`, `auth`, `manager` and the two leaves only the operator's side
 * uses, `cli` and `broker`).
 */
const RANK: Readonly<Record<string, number>> = {
  error_codes: 0,
  errors: 0.5,
  bytes: 1,
  abortable_sleep: 1,
  atomic_file: 1,
  log_limit: 1,
  rate: 1,
  heartbeat: 1,
  safe_text: 1,
  command_types: 1,
  project_cache: 1,
  debian: 1,
  nats: 2,
  permissions: 2,
  trust: 3,
  wire: 4,
  workspace: 4,
  endpoint: 5,
  registry: 5,
  signer: 5,
  delivery: 6,
  auth: 6,
  manager: 6,
  cli: 6,
  broker: 6,
  mcp: 7,
  mesh: 8,
  cmd: 9,
  mod: 9,
};

/** `lib/<area>/...` or `lib/<area>.ts` → area; `cmd/*` → cmd; `mod.ts` → mod. */
function areaOf(path: string): string | undefined {
  const rel = path.slice(rootPath.length);
  if (rel === "mod.ts") return "mod";
  if (rel.startsWith("cmd/")) return "cmd";
  const m = /^lib\/([^/]+?)(?:\.ts)?(?:\/|$)/.exec(rel);
  return m?.[1];
}

interface Edge {
  from: string;
  to: string;
  /** False for an `import type` (erased at run time). */
  code: boolean;
}

/** Every lib/, cmd/ and mod.ts module and its local imports, from one `deno info --json`. */
async function moduleGraph(): Promise<Edge[]> {
  const files: string[] = [`${rootPath}mod.ts`];
  const walk = async (dir: string) => {
    for await (const e of Deno.readDir(dir)) {
      const p = `${dir}/${e.name}`;
      if (e.isDirectory) await walk(p);
      else if (e.name.endsWith(".ts")) files.push(p);
    }
  };
  await walk(`${rootPath}lib`);
  await walk(`${rootPath}cmd`);
  const tmp = await Deno.makeTempDir({ prefix: "cotal-arrows-" });
  try {
    const entry = `${tmp}/all.ts`;
    await Deno.writeTextFile(
      entry,
      files.map((f) => `import "${pathToFileURL(f).href}";\n`).join(""),
    );
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", `--config=${rootPath}deno.json`, entry],
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(out.success, new TextDecoder().decode(out.stderr));
    const info = JSON.parse(new TextDecoder().decode(out.stdout)) as {
      modules: {
        specifier: string;
        dependencies?: { code?: { specifier: string }; type?: { specifier: string } }[];
      }[];
    };
    const edges: Edge[] = [];
    for (const m of info.modules) {
      if (!m.specifier.startsWith(ROOT.href) || !m.specifier.endsWith(".ts")) continue;
      for (const d of m.dependencies ?? []) {
        const to = d.code?.specifier ?? d.type?.specifier;
        if (!to?.startsWith(ROOT.href) || !to.endsWith(".ts")) continue;
        edges.push({ from: fromFileUrl(m.specifier), to: fromFileUrl(to), code: !!d.code });
      }
    }
    assert.ok(edges.length > 500, `the graph has only ${edges.length} local imports`);
    return edges;
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
}

/** The cycles of value imports (strongly connected components of more than one module). */
export function valueCycles(edges: readonly Edge[]): string[][] {
  const next = new Map<string, string[]>();
  for (const e of edges) if (e.code) next.set(e.from, [...next.get(e.from) ?? [], e.to]);
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const on = new Set<string>();
  const cycles: string[][] = [];
  let n = 0;
  const visit = (v: string) => {
    index.set(v, n);
    low.set(v, n++);
    stack.push(v);
    on.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const comp: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        on.delete(w);
        comp.push(w);
      } while (w !== v);
      if (comp.length > 1) cycles.push(comp);
    }
  };
  for (const v of next.keys()) if (!index.has(v)) visit(v);
  return cycles;
}

/** Each import that goes up or sideways, said as `from -> to (area -> area)`. */
export function arrowsAgainst(edges: readonly Edge[]): string[] {
  const wrong: string[] = [];
  for (const e of edges) {
    const a = areaOf(e.from);
    const b = areaOf(e.to);
    if (a === undefined || b === undefined || a === b) continue;
    const ra = RANK[a];
    const rb = RANK[b];
    if (ra === undefined || rb === undefined) {
      wrong.push(`${a === undefined || ra === undefined ? a : b}: an area with no place in RANK`);
    } else if (ra <= rb) {
      wrong.push(
        `${e.from.slice(rootPath.length)} -> ${e.to.slice(rootPath.length)} (${a} -> ${b})`,
      );
    }
  }
  return [...new Set(wrong)];
}

/**
 * Each import from another area into a module of an area that has a `mod.ts`, other than a
 * `mod.ts` (the area's, or a part's own, as `lib/mesh/commands/mod.ts` registers every verb).
 */
export function pastTheBarrel(edges: readonly Edge[], barrels: ReadonlySet<string>): string[] {
  const wrong: string[] = [];
  for (const e of edges) {
    const a = areaOf(e.from);
    const b = areaOf(e.to);
    if (!b || a === b || !barrels.has(b) || e.to.endsWith("/mod.ts")) continue;
    wrong.push(`${e.from.slice(rootPath.length)} -> ${e.to.slice(rootPath.length)}`);
  }
  return [...new Set(wrong)];
}

/** The areas of lib/ that have a `mod.ts`. */
function barrelAreas(): Set<string> {
  const out = new Set<string>();
  for (const e of Deno.readDirSync(`${rootPath}lib`)) {
    try {
      if (e.isDirectory && Deno.statSync(`${rootPath}lib/${e.name}/mod.ts`).isFile) out.add(e.name);
    } catch {
      // No mod.ts: an area entered through its modules (lib/mcp).
    }
  }
  return out;
}

Deno.test("layout - every import from another area goes through that area's mod.ts", async () => {
  const edges = await moduleGraph();
  const barrels = barrelAreas();
  assert.ok(barrels.has("wire") && barrels.has("manager"), [...barrels].join(", "));
  assert.deepEqual(pastTheBarrel(edges, barrels), []);
});

Deno.test("layout - every import in lib/ and cmd/ points down the documented direction", async () => {
  const edges = await moduleGraph();
  assert.deepEqual(arrowsAgainst(edges), []);
});

Deno.test("layout - no cycle of value imports among the modules", async () => {
  const edges = await moduleGraph();
  assert.deepEqual(valueCycles(edges).map((c) => c.map((p) => p.slice(rootPath.length))), []);
});

Deno.test("layout - the checks see an arrow against the direction and a cycle", () => {
  // The judges on a made-up graph: the manager importing the CLI, and two modules importing
  // each other (a type-only pair is not a cycle).
  const p = (rel: string) => `${rootPath}${rel}`;
  const edges: Edge[] = [
    { from: p("lib/manager/a.ts"), to: p("lib/cli/b.ts"), code: true },
    { from: p("lib/wire/x.ts"), to: p("lib/wire/y.ts"), code: true },
    { from: p("lib/wire/y.ts"), to: p("lib/wire/x.ts"), code: true },
    { from: p("lib/trust/t.ts"), to: p("lib/trust/u.ts"), code: true },
    { from: p("lib/trust/u.ts"), to: p("lib/trust/t.ts"), code: false },
    { from: p("lib/nostalgia/n.ts"), to: p("lib/errors.ts"), code: true },
  ];
  assert.deepEqual(arrowsAgainst(edges), [
    "lib/manager/a.ts -> lib/cli/b.ts (manager -> cli)",
    "nostalgia: an area with no place in RANK",
  ]);
  assert.deepEqual(valueCycles(edges).map((c) => c.length), [2]);
  assert.deepEqual(
    pastTheBarrel([
      ...edges,
      { from: p("lib/delivery/d.ts"), to: p("lib/wire/kv.ts"), code: false },
      { from: p("lib/delivery/d.ts"), to: p("lib/wire/mod.ts"), code: true },
      { from: p("lib/delivery/d.ts"), to: p("lib/delivery/e.ts"), code: true },
    ], new Set(["wire", "cli"])),
    ["lib/manager/a.ts -> lib/cli/b.ts", "lib/delivery/d.ts -> lib/wire/kv.ts"],
  );
});
