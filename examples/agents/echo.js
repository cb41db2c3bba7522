/**
 * A module agent: it answers every DM with the same text in upper case.
 *
 *     cotal spawn --agent module --module examples/agents/echo.js --name echo
 *     cotal send echo_1 hello          # prints: HELLO
 *
 * The runner imports the module and calls its `run(ctx)`; the agent lives until `run` returns
 * (its value is the exit code) or `ctx.signal` aborts (a despawn). `ctx.endpoint()` connects it
 * as itself: the first call publishes its presence, so an agent that never calls it never
 * appears online, and `cotal spawn` stops it after 30 s. The module is copied into the agent's
 * sandbox alone: import nothing by a relative path. `ctx` also has `log(line)` (what
 * `cotal attach` shows), `agentDir` (its writable dir) and `launch` (its name, space and role).
 *
 * @module
 */

/** @param {{ endpoint(): Promise<any>, signal: AbortSignal, log(line: string): void }} ctx */
export async function run(ctx) {
  const ep = await ctx.endpoint();
  ep.addEventListener("message", (ev) => {
    if (ev.meta.kind !== "dm") return;
    const text = ev.message.parts.map((p) => p.text ?? "").join("");
    // Answered to its sender; the endpoint acks the DM once this listener returns.
    ep.unicast(ev.message.from.id, text.toUpperCase()).catch((err) => ctx.log(String(err)));
  });
  ctx.log("echo: up, answering DMs");
  await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve));
}
