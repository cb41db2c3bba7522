/**
 * Expects a connect to be refused. npm:nats's Node transport under Deno can surface the
 * server's close of a refused connection as a stray uncaught ECONNRESET/EPIPE right after the
 * refusal; that one error is expected and swallowed while the attempt runs, nothing else.
 */
export async function expectRefused(attempt: () => Promise<unknown>): Promise<Error> {
  const swallow = (e: ErrorEvent) => {
    if (/ECONNRESET|EPIPE/.test(String(e.error))) e.preventDefault();
  };
  globalThis.addEventListener("error", swallow);
  try {
    const r = await attempt().then(
      (v) => ({ ok: true as const, v }),
      (err: Error) => ({ ok: false as const, err }),
    );
    if (r.ok) {
      await (r.v as { close?: () => Promise<void> })?.close?.();
      throw new Error("the connect was expected to be refused but succeeded");
    }
    await new Promise((res) => setTimeout(res, 50));
    return r.err;
  } finally {
    globalThis.removeEventListener("error", swallow);
  }
}
