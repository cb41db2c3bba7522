/**
 * Each area's error-code union (lib/error_codes/) lists exactly the codes that area throws: the
 * compiler already refuses a thrown code no union lists, so this keeps the other direction (a
 * code listed that nothing in its area names any more) and the area (a code thrown in one area
 * but listed under another).
 */
import assert from "node:assert/strict";

const ROOT = new URL("../../", import.meta.url);

/** `lib/error_codes/<file>.ts` → the source folder or file whose codes it lists. */
async function unions(): Promise<Map<string, { source: string; codes: string[] }>> {
  const out = new Map<string, { source: string; codes: string[] }>();
  for await (const e of Deno.readDir(new URL("lib/error_codes/", ROOT))) {
    if (e.name === "mod.ts") continue;
    const text = await Deno.readTextFile(new URL(`lib/error_codes/${e.name}`, ROOT));
    const source = /The codes `([^`]+)` throws/.exec(text)?.[1];
    assert.ok(source, `lib/error_codes/${e.name} does not say whose codes it lists`);
    // The union's quoted codes; a template (`bearer_${reason}`) is judged by its parts' types.
    const union = text.slice(text.indexOf("ErrorCode =")).replace(/`[^`]*`/g, "");
    out.set(e.name, { source, codes: [...union.matchAll(/"([a-z0-9_]+)"/g)].map((m) => m[1]) });
  }
  return out;
}

/** The text of every module of `source` (a folder `lib/x/`, a file, or `cmd/`). */
async function sourceText(source: string): Promise<string> {
  if (source.endsWith(".ts")) return await Deno.readTextFile(new URL(source, ROOT));
  let text = "";
  const walk = async (dir: URL) => {
    for await (const e of Deno.readDir(dir)) {
      if (e.isDirectory) await walk(new URL(`${e.name}/`, dir));
      else if (e.name.endsWith(".ts")) text += await Deno.readTextFile(new URL(e.name, dir));
    }
  };
  await walk(new URL(source, ROOT));
  return text;
}

Deno.test("error codes - every code an area's union lists is named in that area's modules", async () => {
  const stale: string[] = [];
  for (const [file, { source, codes }] of await unions()) {
    const text = await sourceText(source);
    for (const c of codes) if (!text.includes(`"${c}"`)) stale.push(`${file}: ${c}`);
  }
  assert.deepEqual(stale, []);
});

Deno.test("error codes - every code thrown as a literal is in its own area's union", async () => {
  const misplaced: string[] = [];
  for (const [file, { source, codes }] of await unions()) {
    const listed = new Set(codes);
    const text = await sourceText(source);
    for (const m of text.matchAll(/new CotalError\(\s*"([a-z0-9_]+)"/g)) {
      if (!listed.has(m[1])) misplaced.push(`${source} throws ${m[1]}, not in ${file}`);
    }
  }
  assert.deepEqual(misplaced, []);
});
