/**
 * The daemon's loopback HTTP face, against the real process: routing, the capability, the
 * content and size rules, and end-to-end exchange refusals of IdP tokens from a real IdP.
 */
import assert from "node:assert/strict";
import { SignJWT } from "jose";
import { b64json, now, rawToken } from "./_helpers.ts";
import { type ServiceMesh, type ServiceProcess, startServiceMesh } from "./_service_mesh.ts";

async function withService(fn: (mesh: ServiceMesh, svc: ServiceProcess) => Promise<void>) {
  const mesh = await startServiceMesh();
  try {
    const svc = await mesh.start();
    await fn(mesh, svc);
  } finally {
    await mesh.close();
  }
}

Deno.test("service http - routing, methods, browsers, capability, content type and size", async () => {
  await withService(async (mesh, svc) => {
    const url = svc.discovery.url;
    for (const path of ["/nope", "/toString", "/__proto__", "/constructor", "/exchange/x"]) {
      const res = await fetch(`${url}${path}`);
      assert.equal(res.status, 404, path);
      await res.body?.cancel();
    }
    const get = await fetch(`${url}/exchange`);
    assert.equal(get.status, 405);
    assert.equal(get.headers.get("allow"), "POST");
    await get.body?.cancel();
    const postHealth = await fetch(`${url}/health`, { method: "POST", body: "{}" });
    assert.equal(postHealth.status, 405);
    await postHealth.body?.cancel();

    const body = { idpToken: "x", actor: "alice" };
    const origin = await mesh.exchange(svc, body, { headers: { origin: "http://evil.example" } });
    assert.equal(origin.status, 403);
    assert.equal(origin.body.code, "origin_refused");
    const noCap = await mesh.exchange(svc, body, { cap: null });
    assert.equal(noCap.status, 401);
    assert.equal(noCap.body.code, "cap_refused");
    const wrongCap = await mesh.exchange(svc, body, { cap: "0".repeat(64) });
    assert.equal(wrongCap.status, 401);
    assert.equal(wrongCap.body.code, "cap_refused");
    const text = await mesh.exchange(svc, body, { headers: { "content-type": "text/plain" } });
    assert.equal(text.status, 415);
    const big = await mesh.exchange(svc, undefined, {
      raw: JSON.stringify({ idpToken: "x".repeat(70 * 1024), actor: "alice" }),
    });
    assert.equal(big.status, 413, "an oversized body is a 413, not a reset");
    assert.equal(big.body.code, "body_too_large");
    const broken = await mesh.exchange(svc, undefined, { raw: "{not json" });
    assert.equal(broken.status, 400);
    assert.equal(broken.body.code, "bad_json");
    const agentArm = await mesh.exchange(svc, { idpToken: "x", actorToken: "y", actor: "a" });
    assert.equal(agentArm.status, 400);
    const extra = await mesh.exchange(svc, { idpToken: "x", actor: "a", view: "admin" });
    assert.equal(extra.status, 400);
    for (const r of [origin, noCap, wrongCap, text, big, broken]) {
      assert.equal(r.headers.get("access-control-allow-origin"), null);
      assert.equal(r.headers.get("content-type"), "application/json");
    }
  });
});

Deno.test("service http - an IdP token is exchanged for a bearer of a granted actor", async () => {
  await withService(async (mesh, svc) => {
    const row = await mesh.grant("alice");
    const idpToken = await mesh.idp.sign();
    const ok = await mesh.exchange(svc, { idpToken, actor: "alice", ttlSec: 120 });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    assert.equal(ok.body.owner, mesh.owner);
    assert.equal(ok.body.actor, "alice");
    assert.ok(Math.abs((ok.body.exp as number) - (now() + 120)) <= 2);
    const claims = JSON.parse(new TextDecoder().decode(
      Uint8Array.from(
        atob((ok.body.token as string).split(".")[1].replace(/-/g, "+").replace(/_/g, "/")),
        (c) => c.charCodeAt(0),
      ),
    ));
    assert.equal(claims.act.lifecycleUid, row.lifecycleUid);
    assert.equal(claims.iss, `urn:cotal:auth:${mesh.space}`);
    // A bad ttl is the caller's mistake (400), not a credential failure.
    const badTtl = await mesh.exchange(svc, { idpToken, actor: "alice", ttlSec: 901 });
    assert.equal(badTtl.status, 400);
    assert.equal(badTtl.body.code, "bearer_bad_ttl");
    const e = await svc.waitEvent((x) => x.event === "exchange" && x.outcome === "allow");
    assert.equal(e.principal, `${mesh.owner}.alice`);
    assert.ok(!JSON.stringify(svc.events).includes(idpToken), "the log never holds a token");
  });
});

Deno.test("service http - IdP tokens are refused end to end, each with its reason", async () => {
  await withService(async (mesh, svc) => {
    await mesh.grant("alice");
    const idp = mesh.idp;
    const t = now();
    const hs256 = await new SignJWT({
      iss: idp.issuer,
      aud: idp.audience,
      sub: idp.sub,
      iat: t,
      exp: t + 300,
    })
      .setProtectedHeader({ alg: "HS256", kid: idp.kid })
      .sign(new TextEncoder().encode("a shared secret of thirty-two bytes!"));
    const cases: [string, string, Promise<string> | string][] = [
      ["expired", "idp_expired", idp.sign({ iat: t - 600, exp: t - 60 })],
      ["wrong iss", "idp_bad_issuer", idp.sign({ iss: "https://other.example" })],
      ["wrong aud", "idp_bad_audience", idp.sign({ aud: "someone-else" })],
      ["multi-audience", "idp_bad_audience", idp.sign({ aud: [idp.audience, "other"] })],
      [
        "alg none",
        "idp_alg_refused",
        rawToken({ alg: "none", kid: idp.kid }, {
          iss: idp.issuer,
          aud: idp.audience,
          sub: idp.sub,
          iat: t,
          exp: t + 300,
        }),
      ],
      ["HS256", "idp_alg_refused", hs256],
      ["embedded jwk", "idp_embedded_key", idp.sign({}, { header: { jwk: idp.jwks().keys[0] } })],
      ["jku header", "idp_embedded_key", idp.sign({}, { header: { jku: `${idp.origin}/jwks` } })],
      ["a key not in the JWKS", "idp_unknown_kid", idp.sign({}, { strangerKey: true })],
      ["post-dated", "idp_postdated", idp.sign({ iat: t + 3600, exp: t + 3900 })],
      ["tampered", "idp_bad_signature", tamper(await idp.sign())],
    ];
    for (const [what, reason, token] of cases) {
      const r = await mesh.exchange(svc, { idpToken: await token, actor: "alice" });
      assert.equal(r.status, 401, `${what}: ${JSON.stringify(r.body)}`);
      assert.equal(r.body.code, reason, `${what}: ${r.body.error}`);
    }
    const ungranted = await mesh.exchange(svc, { idpToken: await idp.sign(), actor: "bob" });
    assert.equal(ungranted.status, 401);
    assert.equal(ungranted.body.code, "actor_not_granted");
  });
});

Deno.test("service http - refused exchanges are throttled, but a valid token still mints", async () => {
  await withService(async (mesh, svc) => {
    await mesh.grant("alice");
    const bad = await mesh.idp.sign({ aud: "nope" });
    let throttled = 0;
    for (let i = 0; i < 32; i++) {
      const r = await mesh.exchange(svc, { idpToken: bad, actor: "alice" });
      if (r.status === 429) throttled++;
    }
    assert.equal(throttled, 2);
    const good = await mesh.exchange(svc, { idpToken: await mesh.idp.sign(), actor: "alice" });
    assert.equal(good.status, 200);
    // Cap-less probing has its own window: it does not eat the holder's budget, nor vice versa.
    const probe = await mesh.exchange(svc, { idpToken: bad, actor: "alice" }, { cap: null });
    assert.equal(probe.status, 401);
    assert.equal(probe.body.code, "cap_refused");
  });
});

function tamper(token: string): string {
  const [h, p, s] = token.split(".");
  const claims = JSON.parse(new TextDecoder().decode(
    Uint8Array.from(atob(p.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0)),
  ));
  return `${h}.${b64json({ ...claims, sub: "someone-else" })}.${s}`;
}
