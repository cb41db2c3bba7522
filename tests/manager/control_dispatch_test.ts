/**
 * The control rail's dispatch: a spawn's outcome reaches the supervisor's log, a refusal with
 * its sentence and code (newcomer pass 11 read six "spawn requested" lines and one "spawned",
 * with no word on why the other five were refused).
 */
import assert from "node:assert/strict";
import { type ControlOps, dispatchControl } from "../../lib/manager/control_server.ts";
import { CotalError, isCotalError } from "../../lib/errors.ts";

Deno.test("control - a refused spawn is logged with its reason and code, and still refused to the caller", async () => {
  const lines: string[] = [];
  const ops = {
    log: (l: string) => lines.push(l),
    spawn: () =>
      Promise.reject(new CotalError("name_taken", "An agent named upper_1 runs already.")),
  } as unknown as ControlOps;
  const caller = { owner: "local", actor: "operator" } as Parameters<typeof dispatchControl>[2];
  await assert.rejects(
    Promise.resolve(dispatchControl("spawn", {}, caller, ops, "n1")),
    (e) => isCotalError(e, "name_taken"),
  );
  assert.deepEqual(lines, [
    "manager: spawn requested by local.operator",
    "manager: spawn requested by local.operator refused: An agent named upper_1 runs already. [name_taken]",
  ]);
});
