/**
 * The one error type that crosses Cotal's boundaries. `code` is stable (tests and `--json`
 * match on it); `message` is one sentence for people that names what was wrong and the fix.
 */
export class CotalError extends Error {
  /** A stable code for programs (`invalid_channel`, `signer_unreachable`, ...). */
  readonly code: string;
  /** An error with a stable `code` and a one-sentence `message`. */
  constructor(code: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "CotalError";
    this.code = code;
  }
}

/** True when `err` is a {@linkcode CotalError}, optionally with the given code. */
export function isCotalError(err: unknown, code?: string): err is CotalError {
  return err instanceof CotalError && (code === undefined || err.code === code);
}
