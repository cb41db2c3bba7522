import assert from "node:assert/strict";
import * as nkeysJs from "nkeys.js";
import { isCotalError } from "../../lib/errors.ts";
import {
  type AccountClaims,
  createAccount,
  createCurve,
  createOperator,
  createUser,
  decodeJwt,
  encodeJwt,
  seedSigner,
  type Signer,
  type UserClaims,
} from "../../lib/nats/mod.ts";

const TE = new TextEncoder();
const TD = new TextDecoder();

function b64url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_")
    .replace(/=+$/, "");
}
function unb64url(text: string): Uint8Array {
  const bin = atob(text.replaceAll("-", "+").replaceAll("_", "/"));
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}
function json(text: string): Record<string, unknown> {
  return JSON.parse(TD.decode(unb64url(text)));
}

/** Signs arbitrary header and payload objects, to build tokens our encoder would refuse. */
async function craft(header: unknown, payload: unknown, signer: Signer): Promise<string> {
  const input = `${b64url(TE.encode(JSON.stringify(header)))}.${
    b64url(TE.encode(JSON.stringify(payload)))
  }`;
  return `${input}.${b64url(await signer.sign(TE.encode(input)))}`;
}

/** An independent check: the token's shape and its signature through nkeys.js. */
function independentlyVerify(token: string): Record<string, unknown> {
  const [h, p, s] = token.split(".");
  assert.deepEqual(json(h), { typ: "JWT", alg: "ed25519-nkey" });
  const claims = json(p);
  const issuer = nkeysJs.fromPublic(claims.iss as string);
  assert.equal(issuer.verify(TE.encode(`${h}.${p}`), unb64url(s)), true);
  return claims;
}

async function chain() {
  const operator = await createOperator();
  const account = await createAccount();
  const signing = await createAccount();
  const user = await createUser();
  return {
    operator,
    account,
    signing,
    user,
    operatorSigner: await seedSigner(operator.seed),
    accountSigner: await seedSigner(account.seed),
    signingSigner: await seedSigner(signing.seed),
  };
}

Deno.test("jwt - operator JWT round trips and verifies independently", async () => {
  const c = await chain();
  const token = await encodeJwt({
    sub: c.operator.publicKey,
    name: "cotal-demo",
    nats: { type: "operator", system_account: c.account.publicKey },
  }, c.operatorSigner);
  const raw = independentlyVerify(token);
  assert.equal(typeof raw.jti, "string");
  assert.match(raw.jti as string, /^[A-Z2-7]{52}$/);
  const claims = await decodeJwt(token, { type: "operator" });
  assert.equal(claims.iss, c.operator.publicKey);
  assert.equal(claims.sub, c.operator.publicKey);
  assert.equal(claims.name, "cotal-demo");
  assert.equal(claims.nats.version, 2);
  assert.equal(claims.nats.system_account, c.account.publicKey);
  assert.ok(Math.abs(claims.iat - Date.now() / 1000) < 5);
});

Deno.test("jwt - account JWT carries limits, JetStream, signing keys and callout authorization", async () => {
  const c = await chain();
  const callout = await createUser();
  const xkey = await createCurve();
  const token = await encodeJwt({
    sub: c.account.publicKey,
    name: "space",
    nats: {
      type: "account",
      limits: { mem_storage: -1, disk_storage: -1, streams: -1, consumer: -1 },
      signing_keys: [c.signing.publicKey],
      authorization: {
        auth_users: [callout.publicKey],
        allowed_accounts: [c.account.publicKey],
        xkey: xkey.publicKey,
      },
      tags: ["space:demo"],
    },
  }, c.operatorSigner);
  independentlyVerify(token);
  const claims: AccountClaims = await decodeJwt(token, { type: "account" });
  assert.equal(claims.iss, c.operator.publicKey);
  // Unset limits take the unlimited defaults; JetStream stays as given.
  assert.deepEqual(claims.nats.limits, {
    subs: -1,
    data: -1,
    payload: -1,
    imports: -1,
    exports: -1,
    wildcards: true,
    conn: -1,
    leaf: -1,
    mem_storage: -1,
    disk_storage: -1,
    streams: -1,
    consumer: -1,
  });
  assert.deepEqual(claims.nats.signing_keys, [c.signing.publicKey]);
  assert.deepEqual(claims.nats.authorization?.auth_users, [callout.publicKey]);
  assert.equal(claims.nats.authorization?.xkey, xkey.publicKey);
  assert.deepEqual(claims.nats.tags, ["space:demo"]);
});

Deno.test("jwt - user JWT signed by a signing key carries issuer_account and permissions", async () => {
  const c = await chain();
  const exp = Math.floor(Date.now() / 1000) + 3600;
  const token = await encodeJwt({
    sub: c.user.publicKey,
    name: "local-alice",
    exp,
    nats: {
      type: "user",
      issuer_account: c.account.publicKey,
      pub: { allow: ["cotal.s.chat.local.alice.>"], deny: ["$JS.API.CONSUMER.CREATE.DM"] },
      sub: { allow: ["_INBOX_x.>"] },
      resp: { max: 1, ttl: 5_000_000_000 },
      bearer_token: false,
      tags: ["owner:local", "actor:alice"],
    },
  }, c.signingSigner);
  independentlyVerify(token);
  const claims: UserClaims = await decodeJwt(token, { type: "user" });
  assert.equal(claims.iss, c.signing.publicKey);
  assert.equal(claims.exp, exp);
  assert.equal(claims.nats.issuer_account, c.account.publicKey);
  assert.deepEqual(claims.nats.pub?.deny, ["$JS.API.CONSUMER.CREATE.DM"]);
  assert.deepEqual(claims.nats.resp, { max: 1, ttl: 5_000_000_000 });
  // 0 would mean "no subscriptions": unset user limits are written as unlimited.
  assert.equal(claims.nats.subs, -1);
  assert.equal(claims.nats.data, -1);
  assert.equal(claims.nats.payload, -1);
});

Deno.test("jwt - authorization request and response round trip", async () => {
  const c = await chain();
  const server = nkeysJs.createServer();
  const serverSigner = await seedSigner(TD.decode(server.getSeed()));
  const serverXkey = await createCurve();
  const request = await encodeJwt({
    sub: c.account.publicKey,
    aud: "nats-authorization-request",
    exp: Math.floor(Date.now() / 1000) + 2,
    nats: {
      type: "authorization_request",
      server_id: {
        name: "n1",
        host: "127.0.0.1",
        id: server.getPublicKey(),
        xkey: serverXkey.publicKey,
      },
      user_nkey: c.user.publicKey,
      client_info: { host: "127.0.0.1", id: 7 },
      connect_opts: { auth_token: "bearer", name: "nonce12345", protocol: 1 },
    },
  }, serverSigner);
  const req = await decodeJwt(request, { type: "authorization_request" });
  assert.equal(req.iss, server.getPublicKey());
  assert.equal(req.nats.user_nkey, c.user.publicKey);
  assert.equal(req.nats.connect_opts.auth_token, "bearer");
  assert.equal(req.nats.server_id.xkey, serverXkey.publicKey);

  const userJwt = await encodeJwt({
    sub: c.user.publicKey,
    nats: { type: "user", issuer_account: c.account.publicKey },
  }, c.signingSigner);
  const response = await encodeJwt({
    sub: c.user.publicKey,
    aud: server.getPublicKey(),
    nats: { type: "authorization_response", jwt: userJwt, issuer_account: c.account.publicKey },
  }, c.signingSigner);
  independentlyVerify(response);
  const res = await decodeJwt(response, { type: "authorization_response" });
  assert.equal(res.nats.jwt, userJwt);
  assert.equal(res.aud, server.getPublicKey());

  const denial = await encodeJwt({
    sub: c.user.publicKey,
    aud: server.getPublicKey(),
    nats: { type: "authorization_response", error: "no user token presented" },
  }, c.accountSigner);
  assert.equal(
    (await decodeJwt(denial, { type: "authorization_response" })).nats.error,
    "no user token presented",
  );
});

Deno.test("jwt - encode refuses a signer or subject of the wrong role", async () => {
  const c = await chain();
  await assert.rejects(
    encodeJwt({ sub: c.user.publicKey, nats: { type: "user" } }, c.operatorSigner),
    (e) =>
      isCotalError(e, "jwt_bad_issuer") &&
      /must be signed by an account \(A…\) key; got an operator key/.test(e.message),
  );
  await assert.rejects(
    encodeJwt({ sub: c.account.publicKey, nats: { type: "account" } }, c.accountSigner),
    (e) => isCotalError(e, "jwt_bad_issuer"),
  );
  await assert.rejects(
    encodeJwt({ sub: c.account.publicKey, nats: { type: "user" } }, c.accountSigner),
    (e) => isCotalError(e, "jwt_bad_subject") && /sub must be a user public key/.test(e.message),
  );
  await assert.rejects(
    encodeJwt({ sub: c.user.publicKey, exp: 1.5, nats: { type: "user" } }, c.accountSigner),
    (e) => isCotalError(e, "jwt_bad_claims"),
  );
  await assert.rejects(
    encodeJwt({
      sub: c.user.publicKey,
      aud: nkeysJs.createServer().getPublicKey(),
      nats: { type: "authorization_response", jwt: "x", error: "y" },
    }, c.accountSigner),
    (e) => isCotalError(e, "jwt_bad_claims") && /exactly one of/.test(e.message),
  );
  await assert.rejects(
    encodeJwt({
      sub: c.user.publicKey,
      nats: { type: "user", issuer_account: c.operator.publicKey },
    }, c.signingSigner),
    (e) => isCotalError(e, "jwt_bad_issuer") && e.message.includes("issuer_account"),
  );
  await assert.rejects(
    encodeJwt({ sub: c.user.publicKey, nats: { type: "user" } }, c.accountSigner, { iat: -1 }),
    (e) => isCotalError(e, "jwt_bad_claims") && e.message.includes("iat"),
  );
  await assert.rejects(
    encodeJwt({
      sub: c.user.publicKey,
      nats: { type: "authorization_response", error: "no" },
    }, c.accountSigner),
    (e) => isCotalError(e, "jwt_bad_claims") && e.message.includes("aud"),
  );
  await assert.rejects(
    // deno-lint-ignore no-explicit-any
    encodeJwt({ sub: c.user.publicKey, nats: { type: "activation" } } as any, c.accountSigner),
    (e) => isCotalError(e, "jwt_wrong_type"),
  );
});

async function userToken() {
  const c = await chain();
  const token = await encodeJwt(
    { sub: c.user.publicKey, nats: { type: "user" } },
    c.accountSigner,
  );
  const [h, p, s] = token.split(".");
  return { c, token, h, p, s, payload: json(p) };
}

Deno.test("jwt - decode refuses a wrong alg, even when the signature is valid", async () => {
  const { c, payload } = await userToken();
  for (const alg of ["ed25519", "EdDSA", "HS256", "none", "ED25519-NKEY"]) {
    const token = await craft({ typ: "JWT", alg }, payload, c.accountSigner);
    await assert.rejects(
      decodeJwt(token),
      (e) => isCotalError(e, "jwt_bad_alg") && e.message.includes(JSON.stringify(alg)),
    );
  }
  const notJwt = await craft({ typ: "JOSE", alg: "ed25519-nkey" }, payload, c.accountSigner);
  await assert.rejects(decodeJwt(notJwt), (e) => isCotalError(e, "jwt_bad_encoding"));
});

Deno.test("jwt - decode refuses a tampered payload or signature", async () => {
  const { c, h, p, s, payload } = await userToken();
  const other = b64url(
    TE.encode(JSON.stringify({ ...payload, nats: { type: "user", version: 2, subs: 1 } })),
  );
  await assert.rejects(
    decodeJwt(`${h}.${other}.${s}`),
    (e) => isCotalError(e, "jwt_bad_signature") && e.message.includes(c.account.publicKey),
  );
  const sig = unb64url(s);
  sig[0] ^= 0x01;
  await assert.rejects(
    decodeJwt(`${h}.${p}.${b64url(sig)}`),
    (e) => isCotalError(e, "jwt_bad_signature"),
  );
  await assert.rejects(
    decodeJwt(`${h}.${p}.${b64url(sig.subarray(0, 32))}`),
    (e) => isCotalError(e, "jwt_bad_signature"),
  );
  // Re-signed by a key other than iss.
  const impostor = await seedSigner((await createAccount()).seed);
  const forged = await craft(json(h), payload, impostor);
  await assert.rejects(decodeJwt(forged), (e) => isCotalError(e, "jwt_bad_signature"));
});

Deno.test("jwt - decode refuses bad base64url, bad JSON and wrong segment counts", async () => {
  const { h, p, s } = await userToken();
  const cases = [
    `${h}.${p}`,
    `${h}.${p}.${s}.x`,
    `${h}.${p}!.${s}`,
    `${h}.${p}=.${s}`,
    `${h}.${p}.${s}+`,
    `${h}.${b64url(TE.encode("{not json"))}.${s}`,
    `${h}.${b64url(TE.encode("[1,2]"))}.${s}`,
    `${b64url(new Uint8Array([0xff, 0xfe]))}.${p}.${s}`,
    "",
  ];
  for (const token of cases) {
    await assert.rejects(decodeJwt(token), (e) => isCotalError(e, "jwt_bad_encoding"), token);
  }
  await assert.rejects(
    decodeJwt("a".repeat(1024 * 1024 + 1)),
    (e) => isCotalError(e, "jwt_too_large"),
  );
});

Deno.test("jwt - decode refuses missing required fields", async () => {
  const { c, payload } = await userToken();
  const header = { typ: "JWT", alg: "ed25519-nkey" };
  for (const field of ["jti", "iat", "sub", "nats"]) {
    const without = { ...payload };
    delete without[field];
    await assert.rejects(
      decodeJwt(await craft(header, without, c.accountSigner)),
      (e) => isCotalError(e, "jwt_missing_field") && e.message.includes(field),
      field,
    );
  }
  const noIss = { ...payload };
  delete noIss.iss;
  await assert.rejects(
    decodeJwt(await craft(header, noIss, c.accountSigner)),
    (e) => isCotalError(e, "jwt_missing_field") && e.message.includes("iss"),
  );
  await assert.rejects(
    decodeJwt(await craft(header, { ...payload, iat: "now" }, c.accountSigner)),
    (e) => isCotalError(e, "jwt_missing_field"),
  );
  await assert.rejects(
    decodeJwt(await craft(header, { ...payload, nats: { version: 2 } }, c.accountSigner)),
    (e) => isCotalError(e, "jwt_missing_field") && e.message.includes("nats.type"),
  );
  await assert.rejects(
    decodeJwt(await craft(header, { ...payload, nats: { type: "user" } }, c.accountSigner)),
    (e) => isCotalError(e, "jwt_bad_version"),
  );
  await assert.rejects(
    decodeJwt(
      await craft(header, { ...payload, nats: { type: "user", version: 1 } }, c.accountSigner),
    ),
    (e) => isCotalError(e, "jwt_bad_version"),
  );
  await assert.rejects(
    decodeJwt(await craft(header, { ...payload, exp: 1.5 }, c.accountSigner)),
    (e) => isCotalError(e, "jwt_bad_claims") && e.message.includes("exp"),
  );
  const badIssuerAccount = {
    ...payload,
    nats: { type: "user", version: 2, issuer_account: c.user.publicKey },
  };
  await assert.rejects(
    decodeJwt(await craft(header, badIssuerAccount, c.accountSigner)),
    (e) => isCotalError(e, "jwt_bad_issuer") && e.message.includes("issuer_account"),
  );
  const server = await seedSigner(TD.decode(nkeysJs.createServer().getSeed()));
  const request = {
    ...payload,
    iss: server.publicKey,
    nats: { type: "authorization_request", version: 2, server_id: { name: "n" } },
  };
  await assert.rejects(
    decodeJwt(await craft(header, request, server)),
    (e) => isCotalError(e, "jwt_missing_field") && e.message.includes("server_id.id"),
  );
});

Deno.test("jwt - decode refuses an unexpected type and an issuer that cannot sign it", async () => {
  const { c, token, payload } = await userToken();
  await assert.rejects(
    decodeJwt(token, { type: "account" }),
    (e) =>
      isCotalError(e, "jwt_wrong_type") &&
      /type user, but type account was expected/.test(e.message),
  );
  const header = { typ: "JWT", alg: "ed25519-nkey" };
  // A user JWT signed (validly) by the operator, or by another user: the role cannot sign it.
  for (const signer of [c.operatorSigner, await seedSigner((await createUser()).seed)]) {
    const forged = await craft(header, { ...payload, iss: signer.publicKey }, signer);
    await assert.rejects(
      decodeJwt(forged),
      (e) => isCotalError(e, "jwt_bad_issuer") && /must be signed by an account/.test(e.message),
    );
  }
  // A self-signed account JWT is refused: only an operator signs accounts.
  const selfSigned = await craft(header, {
    ...payload,
    iss: c.account.publicKey,
    sub: c.account.publicKey,
    nats: { type: "account", version: 2 },
  }, c.accountSigner);
  await assert.rejects(decodeJwt(selfSigned), (e) => isCotalError(e, "jwt_bad_issuer"));
  const unknown = await craft(header, {
    ...payload,
    nats: { type: "activation", version: 2 },
  }, c.accountSigner);
  await assert.rejects(decodeJwt(unknown), (e) => isCotalError(e, "jwt_wrong_type"));
});

Deno.test("jwt - decode refuses expired and not-yet-valid tokens unless told to read them", async () => {
  const c = await chain();
  const now = Math.floor(Date.now() / 1000);
  const expired = await encodeJwt(
    { sub: c.user.publicKey, exp: now - 10, nats: { type: "user" } },
    c.accountSigner,
  );
  await assert.rejects(decodeJwt(expired), (e) => isCotalError(e, "jwt_expired"));
  assert.equal((await decodeJwt(expired, { ignoreTimes: true })).exp, now - 10);
  assert.equal((await decodeJwt(expired, { now: now - 20 })).exp, now - 10);
  const later = await encodeJwt(
    { sub: c.user.publicKey, nbf: now + 600, nats: { type: "user" } },
    c.accountSigner,
  );
  await assert.rejects(decodeJwt(later), (e) => isCotalError(e, "jwt_not_yet_valid"));
});
