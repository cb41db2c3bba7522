import { remintDaemonCreds, type RemintResult } from "../workspace/mod.ts";
import type { SecretStore } from "../workspace/mod.ts";

/**
 * One scheduled re-sign of the space's daemon creds (delivery, membership-rw) into the store the
 * daemons read, each candidate proven by `probe` against the broker first; every outcome is
 * logged, since `remintDaemonCreds` never throws and a silent failure would ride to expiry.
 */
export async function remintAndLog(
  root: string,
  space: string,
  store: SecretStore,
  probe: (candidate: string) => Promise<boolean>,
  log: (line: string) => void,
): Promise<RemintResult[]> {
  const results = await remintDaemonCreds(root, space, store, { preflight: probe });
  for (const r of results) {
    if (r.ok) log(`manager: re-signed ${r.file}`);
    else if (r.error) log(`manager: ${r.file} not re-signed: ${r.error.message}`);
  }
  return results;
}
