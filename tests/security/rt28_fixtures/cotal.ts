const CHECKOUT = new URL("../../..", import.meta.url).pathname.replace(/\/$/, "");
/** Runs `cotal <args>` from this checkout under a deadline. */
export async function cotal(args: string[], timeoutMs = 120_000) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${CHECKOUT}/cmd/cotal.ts`, ...args],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(timeoutMs),
  }).output();
  const dec = new TextDecoder();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}
