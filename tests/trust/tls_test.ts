/**
 * A TLS broker rendered by serverConfig accepts TLS clients with our creds and refuses a
 * plaintext client (no mixed mode).
 */
import assert from "node:assert/strict";
import { connect } from "nats";
import { startTestBroker, tempDir, uniqueSpace } from "../_harness/broker.ts";
import {
  createSpaceAuth,
  credsAuthenticatorFast,
  mintCreds,
  newIdentity,
  serverConfig,
} from "../../lib/trust/mod.ts";
import { credsId, rawConnect } from "./_helpers.ts";

async function haveOpenssl(): Promise<boolean> {
  try {
    return (await new Deno.Command("openssl", { args: ["version"], stdout: "null" }).output())
      .success;
  } catch {
    return false;
  }
}

Deno.test({
  name: "trust - a TLS broker from serverConfig refuses plaintext and accepts TLS creds",
  ignore: !(await haveOpenssl()),
  async fn() {
    const dir = await tempDir("cotal-tls-");
    const cert = `${dir}/cert.pem`;
    const key = `${dir}/key.pem`;
    const made = await new Deno.Command("openssl", {
      args: [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=localhost",
        "-addext",
        "subjectAltName=IP:127.0.0.1",
        "-keyout",
        key,
        "-out",
        cert,
      ],
      stdout: "null",
      stderr: "piped",
    }).output();
    assert.ok(made.success, new TextDecoder().decode(made.stderr));
    const auth = await createSpaceAuth(uniqueSpace("tls"));
    await using b = await startTestBroker({
      config: ({ port, storeDir }) =>
        serverConfig(auth, [auth], { port, storeDir, tls: { certFile: cert, keyFile: key } }),
    });
    const creds = await mintCreds(auth, newIdentity(), "probe");
    // Plaintext CONNECT on the TLS port never gets a PONG.
    assert.notEqual(await rawConnect(b.url, creds), "PONG");
    const nc = await connect({
      servers: b.url,
      tls: { caFile: cert },
      authenticator: credsAuthenticatorFast(creds),
      inboxPrefix: `_INBOX_${credsId(creds)}`,
      reconnect: false,
    });
    try {
      assert.equal(nc.info?.tls_required, true);
      await nc.flush();
    } finally {
      await nc.close();
    }
  },
});
