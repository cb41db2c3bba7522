/**
 * Our JWTs, creds files and xkeys against a real nats-server in operator mode: the config is
 * rendered by hand here so lib/nats is proven without lib/trust.
 */
import assert from "node:assert/strict";
import { connect, credsAuthenticator } from "nats";
import { type BrokerContext, startTestBroker } from "../_harness/broker.ts";
import {
  createAccount,
  createCurve,
  createOperator,
  createUser,
  decodeJwt,
  encodeJwt,
  type NKeyPair,
  renderCreds,
  seedSigner,
  type Signer,
  xkeyOpen,
  XKeyPair,
  xkeySeal,
} from "../../lib/nats/mod.ts";

const TE = new TextEncoder();
const TD = new TextDecoder();

interface Trust {
  operatorJwt: string;
  sys: NKeyPair;
  accounts: Map<string, string>;
}

function operatorConfig(trust: Trust) {
  return (ctx: BrokerContext) =>
    [
      `listen: "127.0.0.1:${ctx.port}"`,
      `jetstream { store_dir: ${JSON.stringify(ctx.storeDir)} }`,
      `operator: ${trust.operatorJwt}`,
      `system_account: ${trust.sys.publicKey}`,
      "resolver: MEMORY",
      "resolver_preload: {",
      ...[...trust.accounts].map(([pub, jwt]) => `  ${pub}: ${jwt}`),
      "}",
      "",
    ].join("\n");
}

async function baseTrust() {
  const operator = await createOperator();
  const operatorSigner = await seedSigner(operator.seed);
  const sys = await createAccount();
  const data = await createAccount();
  const dataSigning = await createAccount();
  const trust: Trust = {
    operatorJwt: await encodeJwt({
      sub: operator.publicKey,
      name: "op",
      nats: { type: "operator", system_account: sys.publicKey },
    }, operatorSigner),
    sys,
    accounts: new Map(),
  };
  trust.accounts.set(
    sys.publicKey,
    await encodeJwt({ sub: sys.publicKey, name: "SYS", nats: { type: "account" } }, operatorSigner),
  );
  trust.accounts.set(
    data.publicKey,
    await encodeJwt({
      sub: data.publicKey,
      name: "data",
      nats: {
        type: "account",
        signing_keys: [dataSigning.publicKey],
        limits: { mem_storage: -1, disk_storage: -1, streams: 4, consumer: -1 },
      },
    }, operatorSigner),
  );
  return { operatorSigner, trust, data, dataSigning: await seedSigner(dataSigning.seed) };
}

async function userCreds(
  signer: Signer,
  account: string,
  nats: { pub?: { allow?: string[]; deny?: string[] }; sub?: { allow?: string[] } } = {},
  exp?: number,
) {
  const user = await createUser();
  const jwt = await encodeJwt({
    sub: user.publicKey,
    name: "u",
    exp,
    nats: { type: "user", issuer_account: account, ...nats },
  }, signer);
  return { user, creds: await renderCreds(jwt, user.seed) };
}

/**
 * Asserts the broker refuses a connect. npm:nats's Node transport can surface the server's
 * close as a stray ECONNRESET after the refusal; that one error is expected here and swallowed.
 */
async function assertRefused(attempt: () => Promise<unknown>, pattern: RegExp): Promise<void> {
  const swallow = (e: ErrorEvent) => {
    if (/ECONNRESET/.test(String(e.error))) e.preventDefault();
  };
  globalThis.addEventListener("error", swallow);
  try {
    await assert.rejects(attempt(), pattern);
    await new Promise((r) => setTimeout(r, 50));
  } finally {
    globalThis.removeEventListener("error", swallow);
  }
}

function connectWith(url: string, creds: string, extra: Record<string, unknown> = {}) {
  return connect({
    servers: url,
    authenticator: credsAuthenticator(TE.encode(creds)),
    reconnect: false,
    ...extra,
  });
}

Deno.test("broker - a creds file we render connects through credsAuthenticator", async () => {
  const { trust, data, dataSigning } = await baseTrust();
  await using broker = await startTestBroker({ config: operatorConfig(trust) });
  const { creds } = await userCreds(dataSigning, data.publicKey, {
    pub: { allow: ["ok.>", "$JS.API.>"], deny: ["ok.secret"] },
    sub: { allow: ["ok.>", "_INBOX.>"] },
  });
  const nc = await connectWith(broker.url, creds);
  try {
    const sub = nc.subscribe("ok.*", { max: 1 });
    nc.publish("ok.hello", "hi");
    for await (const m of sub) assert.equal(m.string(), "hi");
    // The account's JetStream limits are the ones we encoded.
    const jsm = await nc.jetstreamManager();
    const info = await jsm.getAccountInfo();
    assert.equal(info.limits.max_streams, 4);
    // A denied publish is refused by the broker (a permissions violation on the connection).
    const violation = (async () => {
      for await (const s of nc.status()) {
        const context = (s as { permissionContext?: { subject: string } }).permissionContext;
        if (s.data === "PERMISSIONS_VIOLATION") return context?.subject;
      }
    })();
    nc.publish("ok.secret", "x");
    assert.equal(await violation, "ok.secret");
  } finally {
    await nc.close();
  }
});

Deno.test("broker - refuses creds signed by a key the account does not list, or expired", async () => {
  const { trust, data, dataSigning } = await baseTrust();
  await using broker = await startTestBroker({ config: operatorConfig(trust) });
  const stranger = await seedSigner((await createAccount()).seed);
  const { creds } = await userCreds(stranger, data.publicKey);
  await assertRefused(() => connectWith(broker.url, creds), /Authorization Violation/i);
  const expired = await userCreds(
    dataSigning,
    data.publicKey,
    {},
    Math.floor(Date.now() / 1000) - 5,
  );
  await assertRefused(
    () => connectWith(broker.url, expired.creds),
    /Authorization Violation|expired/i,
  );
  const fine = await connectWith(broker.url, (await userCreds(dataSigning, data.publicKey)).creds);
  await fine.close();
});

Deno.test("broker - auth callout: our xkey, request decode and response encode interoperate", async () => {
  const { operatorSigner, trust, data, dataSigning } = await baseTrust();
  const auth = await createAccount();
  const authSigner = await seedSigner(auth.seed);
  const calloutUser = await createUser();
  const xkey = await createCurve();
  trust.accounts.set(
    auth.publicKey,
    await encodeJwt({
      sub: auth.publicKey,
      name: "AUTH",
      nats: {
        type: "account",
        authorization: {
          auth_users: [calloutUser.publicKey],
          allowed_accounts: [data.publicKey],
          xkey: xkey.publicKey,
        },
      },
    }, operatorSigner),
  );
  await using broker = await startTestBroker({ config: operatorConfig(trust) });
  const calloutCreds = await renderCreds(
    await encodeJwt({ sub: calloutUser.publicKey, nats: { type: "user" } }, authSigner),
    calloutUser.seed,
  );
  const service = await connectWith(broker.url, calloutCreds);
  const pair = await XKeyPair.fromSeed(xkey.seed);
  const seen: string[] = [];
  const sub = service.subscribe("$SYS.REQ.USER.AUTH");
  const serving = (async () => {
    for await (const msg of sub) {
      const serverXkey = msg.headers?.get("Nats-Server-Xkey") ?? "";
      const token = TD.decode(await xkeyOpen(msg.data, pair, serverXkey));
      const req = await decodeJwt(token, { type: "authorization_request" });
      assert.equal(req.iss, req.nats.server_id.id);
      assert.equal(req.nats.server_id.xkey, serverXkey);
      const bearer = req.nats.connect_opts.auth_token ?? "";
      seen.push(bearer);
      const response = bearer === "let-me-in"
        ? {
          jwt: await encodeJwt({
            sub: req.nats.user_nkey,
            name: "callout-user",
            nats: {
              type: "user",
              issuer_account: data.publicKey,
              pub: { allow: ["cb.>"] },
              sub: { allow: ["cb.>", "_INBOX.>"] },
            },
          }, dataSigning),
        }
        : { error: "bad bearer" };
      const resJwt = await encodeJwt({
        sub: req.nats.user_nkey,
        aud: req.nats.server_id.id,
        nats: { type: "authorization_response", ...response },
      }, authSigner);
      msg.respond(await xkeySeal(TE.encode(resJwt), pair, serverXkey));
    }
  })();
  const sentinelUser = await createUser();
  const sentinel = await renderCreds(
    await encodeJwt({
      sub: sentinelUser.publicKey,
      nats: { type: "user", pub: { deny: [">"] }, sub: { deny: [">"] } },
    }, authSigner),
    sentinelUser.seed,
  );
  try {
    const client = await connectWith(broker.url, sentinel, { token: "let-me-in" });
    const got = client.subscribe("cb.x", { max: 1 });
    client.publish("cb.x", "through the callout");
    for await (const m of got) assert.equal(m.string(), "through the callout");
    await client.close();
    await assertRefused(
      () => connectWith(broker.url, sentinel, { token: "wrong" }),
      /Authorization Violation/i,
    );
    assert.deepEqual(seen, ["let-me-in", "wrong"]);
  } finally {
    sub.unsubscribe();
    await service.close();
    await serving;
  }
});
