/**
 * The manager's control rail, enforced by a real broker: a control caller reaches the
 * supervisor only as itself and hears only its own replies; the supervisor serves the rail and
 * the session frames; an agent has no way onto the rail at all.
 */
import assert from "node:assert/strict";
import { uniqueSpace } from "../_harness/broker.ts";
import {
  createSpaceAuth,
  mintCreds,
  newIdentity,
  newLifecycleUid,
  type SpaceAuth,
} from "../../lib/trust/mod.ts";
import {
  connectCreds,
  delivered,
  publishDenied,
  startAuthBroker,
  subscribeDenied,
  watchViolations,
} from "./_helpers.ts";
import { names } from "./_space.ts";

const auth = await createSpaceAuth(uniqueSpace("rail"));
const n = names(auth.space);
const uid = newLifecycleUid();
const nonce = "AAAAAAAAAAAAAAAAAAAAAA";

async function as(url: string, a: SpaceAuth, profile: Parameters<typeof mintCreds>[2], opts = {}) {
  return await connectCreds(url, await mintCreds(a, newIdentity(), profile, opts));
}

Deno.test("trust - the manager's control rail: callers speak only as themselves, agents not at all", async () => {
  await using b = await startAuthBroker(auth, [auth]);
  const sup = await as(b.url, auth, "supervisor", { principal: { owner: "local", actor: "mgr" } });
  const op = await as(b.url, auth, "control-caller", {
    principal: { owner: "local", actor: "op" },
  });
  const agent = await as(b.url, auth, "agent", {
    principal: { owner: "local", actor: "alice" },
    lifecycleUid: uid,
  });
  try {
    const opSeen = watchViolations(op);
    const supSeen = watchViolations(sup);
    const agentSeen = watchViolations(agent);
    const req = (actor: string) => `${n.P}.ep.one.manager.status.local.${actor}.${uid}.${nonce}`;
    const reply = (actor: string) =>
      `${n.P}.ep.reply.manager.i1aaaaaaaa.e1aaaaaaaa.local.${actor}.${uid}.${nonce}`;
    // Caller -> supervisor on the class rail, and supervisor -> caller on its reply rail.
    assert.ok(await delivered(op, sup, `${n.P}.ep.one.manager.*.*.*.*.*`, req("op")));
    assert.ok(
      await delivered(sup, op, `${n.P}.ep.reply.manager.*.*.local.op.*.*`, reply("op")),
    );
    assert.ok(
      await delivered(
        op,
        sup,
        `${n.P}.ep.inst.manager.*.*.*.*.*.*`,
        `${n.P}.ep.inst.manager.i1aaaaaaaa.ps.local.op.${uid}.${nonce}`,
      ),
    );
    // Session frames: the caller writes `in`, the supervisor writes `out`.
    assert.ok(
      await delivered(
        op,
        sup,
        `${n.P}.eps.manager.*.*.in`,
        `${n.P}.eps.manager.s1aaaaaaaa.e1aaaaaaaa.in`,
      ),
    );
    assert.ok(
      await delivered(
        sup,
        op,
        `${n.P}.eps.manager.*.*.out`,
        `${n.P}.eps.manager.s1aaaaaaaa.e1aaaaaaaa.out`,
      ),
    );
    // The caller cannot speak as someone else or hear someone else's replies.
    assert.ok(await publishDenied(op, opSeen, req("alice")));
    assert.ok(await subscribeDenied(op, opSeen, `${n.P}.ep.reply.manager.*.*.local.alice.*.*`));
    assert.ok(await subscribeDenied(op, opSeen, `${n.P}.ep.one.manager.>`));
    assert.ok(await publishDenied(op, opSeen, `${n.P}.eps.manager.s1aaaaaaaa.e1aaaaaaaa.out`));
    assert.ok(await subscribeDenied(op, opSeen, `${n.P}.chat.>`));
    // The supervisor cannot call the rail as a caller, nor read input it did not serve.
    assert.ok(await publishDenied(sup, supSeen, req("mgr")));
    assert.ok(await publishDenied(sup, supSeen, `${n.P}.eps.manager.s1aaaaaaaa.e1aaaaaaaa.in`));
    // An agent has nothing on the rail: no request (a mint, a spawn), no reply, no session.
    for (const cmd of ["mint", "spawn", "status"]) {
      assert.ok(
        await publishDenied(
          agent,
          agentSeen,
          `${n.P}.ep.one.manager.${cmd}.local.alice.${uid}.${nonce}`,
        ),
        cmd,
      );
    }
    assert.ok(await subscribeDenied(agent, agentSeen, `${n.P}.ep.reply.manager.>`));
    assert.ok(await subscribeDenied(agent, agentSeen, `${n.P}.eps.manager.*.*.out`));
    assert.ok(await publishDenied(agent, agentSeen, `${n.P}.eps.manager.s1aaaaaaaa.e1aaaaaaaa.in`));
  } finally {
    await Promise.all([sup.close(), op.close(), agent.close()]);
  }
});
