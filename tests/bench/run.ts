/**
 * `deno task bench`: runs every benchmark in this folder one after another (never in parallel:
 * they compare against raw NATS on the same 2 cores) and lets each rewrite its own section of
 * docs/BENCHMARKS.md. `deno task bench <name>` runs only the ones whose file name contains it.
 */
const dir = new URL(".", import.meta.url).pathname;
const filter = Deno.args[0];
const files = [...Deno.readDirSync(dir)]
  .map((e) => e.name)
  .filter((n) => n.endsWith("_bench.ts") && (!filter || n.includes(filter)))
  .sort();
let failed = 0;
for (const f of files) {
  console.error(`bench: ${f}`);
  const st = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${dir}${f}`, "--write"],
    stdout: "inherit",
    stderr: "inherit",
  }).output();
  if (!st.success) {
    failed++;
    console.error(`bench: ${f} failed (exit ${st.code})`);
  }
}
console.error(`bench: ${files.length - failed} of ${files.length} benchmarks ran`);
Deno.exit(failed ? 1 : 0);
