/**
 * The two $SYS credentials against a real broker: the observer sees exactly its account's
 * connections and events, the evictor can only KICK.
 */
import assert from "node:assert/strict";
import { connect, type NatsConnection } from "nats";
import { uniqueSpace } from "../_harness/broker.ts";
import {
  composeSpaceAuth,
  createBrokerAuth,
  createSpaceAccountAuth,
  credsAuthenticatorFast,
  EVICTOR_INBOX_PREFIX,
  MEMBERSHIP_INBOX_PREFIX,
  mintConnectionEvictorCreds,
  mintCreds,
  mintMembershipObserverCreds,
  newIdentity,
} from "../../lib/trust/mod.ts";
import {
  connectCreds,
  requestDenied,
  requestJson,
  startAuthBroker,
  subscribeDenied,
  watchViolations,
} from "./_helpers.ts";

const broker = await createBrokerAuth("sys");
const a = composeSpaceAuth(broker, await createSpaceAccountAuth(broker, uniqueSpace("sysa")));
const b = composeSpaceAuth(broker, await createSpaceAccountAuth(broker, uniqueSpace("sysb")));

type Connz = {
  server: { id: string };
  data: { connections?: Array<{ cid: number; name?: string }> };
};

Deno.test("trust - the $SYS observer and evictor hold only their grants", async (t) => {
  await using srv = await startAuthBroker(broker, [a, b]);
  const observer = await connectCreds(
    srv.url,
    await mintMembershipObserverCreds(a, newIdentity()),
    {
      inboxPrefix: MEMBERSHIP_INBOX_PREFIX,
    },
  );
  const evictor = await connectCreds(
    srv.url,
    await mintConnectionEvictorCreds(broker, newIdentity()),
    {
      inboxPrefix: EVICTOR_INBOX_PREFIX,
    },
  );
  const victimCreds = await mintCreds(a, newIdentity(), "probe");
  try {
    let connz: Connz | undefined;
    let victim: NatsConnection | undefined;
    await t.step("observer: its account's CONNZ and connect events, nothing else", async () => {
      const events = observer.subscribe(`$SYS.ACCOUNT.${a.account.pub}.CONNECT`, { max: 1 });
      await observer.flush();
      victim = await connect({
        servers: srv.url,
        authenticator: credsAuthenticatorFast(victimCreds),
        name: "victim",
        reconnect: false,
      });
      for await (const m of events) {
        assert.equal(m.json<{ client: { name: string } }>().client.name, "victim");
      }
      connz = await requestJson(observer, `$SYS.REQ.ACCOUNT.${a.account.pub}.CONNZ`, {
        auth: true,
      }) as unknown as Connz;
      assert.ok(connz.data.connections?.some((c) => c.name === "victim"));
      assert.ok(
        await requestDenied(observer, `$SYS.REQ.ACCOUNT.${b.account.pub}.CONNZ`),
        "sibling",
      );
      assert.ok(await requestDenied(observer, "$SYS.REQ.SERVER.PING.CONNZ"), "broker-wide CONNZ");
      assert.ok(await requestDenied(observer, `$SYS.REQ.SERVER.${connz.server.id}.KICK`), "KICK");
      const seen = watchViolations(observer);
      assert.ok(await subscribeDenied(observer, seen, `$SYS.ACCOUNT.${b.account.pub}.CONNECT`));
      assert.ok(await subscribeDenied(observer, seen, "$SYS.ACCOUNT.>"));
      assert.ok(await subscribeDenied(observer, seen, "_INBOX.>"));
    });

    await t.step("evictor: KICK disconnects a connection", async () => {
      const cid = connz!.data.connections!.find((c) => c.name === "victim")!.cid;
      await evictor.request(`$SYS.REQ.SERVER.${connz!.server.id}.KICK`, JSON.stringify({ cid }), {
        timeout: 2000,
      });
      const err = await victim!.closed();
      assert.ok(victim!.isClosed(), String(err));
    });

    await t.step("evictor: may not read CONNZ or sniff inboxes", async () => {
      assert.ok(await requestDenied(evictor, "$SYS.REQ.SERVER.PING.CONNZ"));
      assert.ok(await requestDenied(evictor, `$SYS.REQ.ACCOUNT.${a.account.pub}.CONNZ`));
      const seen = watchViolations(evictor);
      assert.ok(await subscribeDenied(evictor, seen, "_INBOX.>"));
      assert.ok(await subscribeDenied(evictor, seen, "$SYS.>"));
    });
  } finally {
    await observer.close();
    await evictor.close();
  }
});
