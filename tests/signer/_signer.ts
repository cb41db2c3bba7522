/** What the signer tests share: `cotal-signer` under its row for a space, and a refusal check. */
import type { CotalErrorCode } from "../../lib/error_codes/mod.ts";
import assert from "node:assert/strict";
import { isCotalError } from "../../lib/errors.ts";
import { spaceKeyHex } from "../../lib/workspace/keys.ts";
import { type DaemonProcess, type DeliverySpace, startExecutable } from "../delivery/_helpers.ts";

/** `cotal-signer` for `s`'s space, a real process under its permission row. */
export function startSigner(s: DeliverySpace): DaemonProcess {
  const port = new URL(s.url).port;
  return startExecutable("cotal-signer", {
    root: s.root,
    broker: [`127.0.0.1:${port}`],
    spaceKey: `space.${spaceKeyHex(s.space)}`,
  }, ["--space", s.space, "--server", s.url, "--root", s.root]);
}

/** Asserts `p` rejects with the CotalError `code` (and a message matching `text`). */
export async function refusedWith(
  p: Promise<unknown>,
  code: CotalErrorCode,
  text?: RegExp,
): Promise<void> {
  await assert.rejects(p, (e) => {
    assert.ok(isCotalError(e, code), `expected ${code}, got ${String(e)}`);
    if (text) assert.match((e as Error).message, text);
    return true;
  });
}
