/**
 * Red team 33, a hostile harness behind `cotal mcp`: tool arguments and spawn-channel lines
 * whose keys are names every plain object inherits (`constructor`, `toString`, `__proto__`,
 * `hasOwnProperty`). Every tool's schema says `additionalProperties: false` and the server
 * promises unknown arguments are refused; `checkArguments` tests `k in props`, which is true for
 * inherited names. The spawn channel (the supervisor's side) is tried with the same keys.
 *
 * Passes when the defence holds: every such argument is refused.
 */
import assert from "node:assert/strict";
import { checkArguments, type MeshTool, meshTools } from "../../lib/mcp/tools.ts";
import { parseSpawnChannelRequest } from "../../lib/manager/sandbox/spawn_channel.ts";
import { isCotalError } from "../../lib/errors.ts";

const tools = meshTools(
  // deno-lint-ignore no-explicit-any
  {} as any,
  // deno-lint-ignore no-explicit-any
  {} as any,
);
const post = tools.find((t) => t.name === "post") as MeshTool;

Deno.test("red team 33 - cotal mcp refuses arguments named like Object.prototype's members", () => {
  const passed: string[] = [];
  for (const k of ["constructor", "toString", "__proto__", "hasOwnProperty", "valueOf"]) {
    const args = JSON.parse(`{"channel":"general","text":"hi",${JSON.stringify(k)}:{"x":1}}`);
    try {
      checkArguments(post, args);
      passed.push(k);
    } catch (err) {
      // Refused, as promised, with the tool's own code and the name it refused.
      if (!isCotalError(err, "mcp_bad_arguments") || !err.message.includes(JSON.stringify(k))) {
        passed.push(`${k} (${err})`);
      }
    }
  }
  assert.deepEqual(passed, [], `post took unknown arguments: ${passed.join(", ")}`);
});

Deno.test("red team 33 - the spawn channel refuses inherited op names, prototype keys and path personas", () => {
  const lines = [
    '{"v":1,"op":"constructor"}',
    '{"v":1,"op":"__proto__"}',
    '{"v":1,"op":"toString","persona":"a"}',
    '{"v":1,"op":"spawn","persona":"reviewer","__proto__":{"trusted":true}}',
    '{"v":1,"op":"spawn","persona":"../../etc/passwd"}',
    '{"v":1,"op":"spawn","persona":"a\\u001b[2J"}',
    '{"v":1,"op":"despawn","name":"constructor","x":1}',
  ];
  const taken = lines.filter((l) => {
    try {
      parseSpawnChannelRequest(l);
      return true;
    } catch {
      return false;
    }
  });
  assert.deepEqual(taken, []);
});
