import assert from "node:assert/strict";
import {
  composeSpaceAuth,
  createBrokerAuth,
  createSpaceAccountAuth,
  createSpaceAuth,
  parseBrokerAuth,
  parseSpaceAccountAuth,
  rotateDataAccountSigningKey,
  serializeBrokerAuth,
  serializeSpaceAccountAuth,
  stripSpaceAuth,
  validateSpaceAuth,
} from "../../lib/trust/mod.ts";

function code(c: string) {
  return (err: unknown) => {
    assert.equal((err as { code?: string }).code, c, String(err));
    return true;
  };
}

const broker = await createBrokerAuth("records");
const acct = await createSpaceAccountAuth(broker, "alpha");

Deno.test("trust - broker.json never holds the SYS seed and round-trips", async () => {
  assert.ok(broker.sys.signingSeed?.startsWith("SA"));
  const text = serializeBrokerAuth(broker);
  assert.ok(!text.includes(broker.sys.signingSeed!));
  const parsed = await parseBrokerAuth(text);
  assert.equal(parsed.sys.signingSeed, undefined);
  assert.deepEqual(parsed.operator, broker.operator);
  assert.equal(parsed.sys.pub, broker.sys.pub);
  assert.equal(parsed.gen, 0);
  assert.deepEqual(Object.keys(JSON.parse(text)).sort(), ["gen", "operator", "sys"]);
});

Deno.test("trust - account.<hex>.json round-trips and refuses another space", async () => {
  const text = serializeSpaceAccountAuth(acct);
  assert.deepEqual(await parseSpaceAccountAuth(text, "alpha"), acct);
  await assert.rejects(parseSpaceAccountAuth(text, "beta"), code("wrong_space"));
});

Deno.test("trust - corrupt trust records are refused without echoing their bytes", async () => {
  const rec = JSON.parse(serializeBrokerAuth(broker));
  const cases: Array<[string, unknown]> = [
    ["not json", "{ nope"],
    ["null gen", { ...rec, gen: null }],
    ["float gen", { ...rec, gen: 1.5 }],
    ["no operator jwt", { ...rec, operator: { seed: rec.operator.seed } }],
    ["another operator seed", {
      ...rec,
      operator: { ...rec.operator, seed: (await createBrokerAuth("x")).operator.seed },
    }],
    ["foreign sys", {
      ...rec,
      sys: (({ signingSeed: _s, ...s }) => s)((await createBrokerAuth("y")).sys),
    }],
  ];
  for (const [what, value] of cases) {
    const text = typeof value === "string" ? value : JSON.stringify(value);
    await assert.rejects(parseBrokerAuth(text), (err: Error) => {
      code("corrupt_trust_record")(err);
      assert.ok(!err.message.includes(rec.operator.seed), what);
      return true;
    }, what);
  }
  const a = JSON.parse(serializeSpaceAccountAuth(acct));
  const other = await createSpaceAccountAuth(broker, "alpha");
  for (
    const bad of [
      { ...a, account: { ...a.account, signingSeed: other.account.signingSeed } },
      { ...a, account: { ...a.account, seed: other.account.seed } },
      { ...a, account: { ...a.account, jwt: undefined } },
    ]
  ) {
    await assert.rejects(parseSpaceAccountAuth(JSON.stringify(bad)), code("corrupt_trust_record"));
  }
});

Deno.test("trust - the chain validator refuses relabelled, foreign and stale bundles", async () => {
  const auth = composeSpaceAuth(broker, acct);
  await validateSpaceAuth(auth, "alpha");
  await assert.rejects(validateSpaceAuth(auth, "beta"), code("wrong_space"));
  // B's chain labelled "alpha": the signed account name gives it away.
  const beta = await createSpaceAccountAuth(broker, "beta");
  await assert.rejects(
    validateSpaceAuth(composeSpaceAuth(broker, { space: "alpha", account: beta.account })),
    code("wrong_space"),
  );
  await assert.rejects(
    parseSpaceAccountAuth(serializeSpaceAccountAuth({ space: "alpha", account: beta.account })),
    code("wrong_space"),
  );
  // An account of another operator cannot be composed with this broker.
  const foreign = await createSpaceAuth("alpha");
  assert.throws(() => composeSpaceAuth(broker, foreign), code("foreign_account"));
  await assert.rejects(
    validateSpaceAuth({ ...auth, account: foreign.account }),
    code("foreign_account"),
  );
  // After a rotation the old signing key is no longer listed.
  const rotated = await rotateDataAccountSigningKey(auth);
  await validateSpaceAuth(rotated, "alpha");
  await assert.rejects(
    validateSpaceAuth({
      ...rotated,
      account: {
        ...rotated.account,
        signingSeed: auth.account.signingSeed,
        signingPub: auth.account.signingPub,
      },
    }),
    code("stale_signing_key"),
  );
  await assert.rejects(validateSpaceAuth(stripSpaceAuth(auth)), code("stripped_bundle"));
});

Deno.test("trust - rotation needs the full bundle and keeps the account", async () => {
  const auth = composeSpaceAuth(broker, acct);
  await assert.rejects(rotateDataAccountSigningKey(stripSpaceAuth(auth)), code("stripped_bundle"));
  const rotated = await rotateDataAccountSigningKey(auth);
  assert.equal(rotated.account.pub, auth.account.pub);
  assert.notEqual(rotated.account.signingPub, auth.account.signingPub);
  assert.notEqual(rotated.account.jwt, auth.account.jwt);
  assert.equal(rotated.sys.pub, auth.sys.pub);
});

Deno.test("trust - two createSpaceAuth of one name are different chains", async () => {
  const x1 = await createSpaceAuth("x");
  const x2 = await createSpaceAuth("x");
  assert.notEqual(x1.account.pub, x2.account.pub);
  assert.notEqual(x1.operator.pub, x2.operator.pub);
  await validateSpaceAuth(x1, "x");
  await validateSpaceAuth(x2, "x");
  assert.throws(
    () => composeSpaceAuth(x1, { space: "x", account: x2.account }),
    code("foreign_account"),
  );
});
