/**
 * A child process for the connect-guard test: 100 connects the broker refuses (a credential of
 * another operator) and 100 to a listener that greets like a broker and then resets the
 * connection, through Cotal's connect, with no error handler of any kind installed. It prints
 * `refused=<n> reset=<n> dropped=<n>` and exits 0 if it lives to the end.
 */
import { connect, droppedSocketErrors } from "../../lib/nats/connect.ts";
import { credsAuthenticatorFast } from "../../lib/trust/mod.ts";

const [url, creds, resetPort, n] = Deno.args;
let refused = 0;
for (let i = 0; i < Number(n); i++) {
  try {
    const nc = await connect({
      servers: url,
      authenticator: credsAuthenticatorFast(creds),
      maxReconnectAttempts: 0,
    });
    await nc.close();
  } catch {
    refused++;
  }
}
let reset = 0;
for (let i = 0; i < Number(n); i++) {
  try {
    const nc = await connect({
      servers: `127.0.0.1:${resetPort}`,
      maxReconnectAttempts: 0,
      timeout: 300,
    });
    await nc.close();
  } catch {
    reset++;
  }
}
console.log(`refused=${refused} reset=${reset} dropped=${droppedSocketErrors()}`);
