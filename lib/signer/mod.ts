/**
 * lib/signer: the space's signer as a daemon (`cotal-signer`) and its client. The signer alone
 * loads a space's signing seeds; a supervisor (or any admitted component) asks it for user JWTs
 * with {@linkcode remoteSigner}, a `CredentialSigner` (lib/trust) whose caller never holds a
 * seed. What it signs for whom is frozen policy ({@linkcode SIGNER_POLICY}); every decision is
 * audited ({@linkcode readAudit}).
 *
 * @module
 */
import { spaceKeyHex } from "../workspace/mod.ts";

export { appendAudit, type AuditEntry, readAudit } from "./audit.ts";
export {
  type RemoteSigner,
  remoteSigner,
  type RemoteSignerOptions,
  type SignerConnection,
} from "./client.ts";
export { isReservedActor, type ProfileRule, SIGNER_POLICY } from "./policy.ts";
export { type RunningSigner, runSigner, type RunSignerOptions } from "./run.ts";
export { SIGN_CONTEXT, type SignerStats } from "./serve.ts";

/**
 * The default audit trail of the signer of `space` under `root`, in the audit dir only the
 * signer writes (lib/permissions.ts; under systemd its own user's, lib/mesh/systemd.ts).
 */
export function signerAuditPath(root: string, space: string): string {
  return `${root}/audit/signer.space.${spaceKeyHex(space)}.audit.jsonl`;
}
