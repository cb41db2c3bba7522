/**
 * Shared by the benchmarks: percentiles, and rewriting one marked section of
 * docs/BENCHMARKS.md so each benchmark owns its own part of the file.
 */

/** The p-th percentile (0..100) of samples, nearest-rank. */
export function percentile(samples: number[], p: number): number {
  const s = [...samples].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
}

/** Replaces (or appends) the section between `<!-- bench:<name>:start -->` and its end mark. */
export async function writeSection(name: string, markdown: string): Promise<void> {
  const path = new URL("../../docs/BENCHMARKS.md", import.meta.url).pathname;
  let text = "# Benchmarks\n";
  try {
    text = await Deno.readTextFile(path);
  } catch {
    // A new file.
  }
  const start = `<!-- bench:${name}:start -->`;
  const end = `<!-- bench:${name}:end -->`;
  const block = `${start}\n${markdown.trim()}\n${end}`;
  const i = text.indexOf(start);
  const j = text.indexOf(end);
  text = i >= 0 && j > i
    ? text.slice(0, i) + block + text.slice(j + end.length)
    : `${text.trimEnd()}\n\n${block}\n`;
  await Deno.writeTextFile(path, text);
}

/** One line describing the machine and the run, for the top of a section. */
export function runContext(command: string): string {
  const load = Deno.loadavg()[0].toFixed(1);
  return `Measured ${new Date().toISOString().slice(0, 10)} with Deno ${Deno.version.deno} on ` +
    `${Deno.build.os}/${Deno.build.arch} (${navigator.hardwareConcurrency} CPUs, load ${load}) by ` +
    `\`${command}\`.`;
}
