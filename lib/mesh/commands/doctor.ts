/**
 * `cotal doctor auth`: every stored cred's health (expiry, renewal, missing) and the store's
 * modes and links, with `--fix` for what can be fixed.
 *
 * @module
 */
import { defineCommand, denoIo, JSON_FLAG, printResult } from "../../cli/mod.ts";
import { registry } from "../../registry.ts";
import {
  doctorAuth,
  type DoctorAuthRow,
  doctorStore,
  isFailingCred,
  type StoreProblem,
  workspaceSecretStore,
} from "../../workspace/mod.ts";
import { resolveExistingRoot, ROOT_FLAG } from "./common.ts";

function remaining(s: number | undefined): string {
  if (s === undefined) return "";
  const abs = Math.abs(s);
  const t = abs >= 86400
    ? `${Math.floor(abs / 86400)}d`
    : abs >= 3600
    ? `${Math.floor(abs / 3600)}h`
    : `${Math.floor(abs / 60)}m`;
  return s < 0 ? `expired ${t} ago` : `${t} left`;
}

/** One line per cred, for people. */
export function credRows(rows: DoctorAuthRow[]): string {
  // As wide as the longest name (an agent's cred names its lifecycle: newcomer pass 10's ran
  // past a fixed width and the columns broke).
  const kindWidth = Math.max(26, ...rows.map((r) => r.kind.length));
  return rows.map((r) =>
    `${r.status.padEnd(11)} ${(r.space ?? "").padEnd(16)} ${r.kind.padEnd(kindWidth)} ${
      remaining(r.remainingSeconds)
    }${r.detail ? ` (${r.detail})` : ""}${
      r.fix
        ? (r.fix.ok ? " -> re-signed" : ` -> not fixed: ${r.fix.error?.message ?? r.fix.skipped}`)
        : ""
    }`
  ).join("\n");
}

/** One line per store problem, for people. */
export function storeRows(problems: StoreProblem[]): string {
  return problems.map((p) =>
    `  ${p.code.padEnd(17)} ${p.message}${
      p.fixed === undefined ? "" : p.fixed ? " -> fixed" : " -> not fixed"
    }`
  ).join("\n");
}

/** `cotal doctor auth [--fix]`. */
export const doctorAuthCommand = defineCommand({
  kind: "command",
  name: "doctor auth",
  summary: "check every stored cred: healthy, near-expiry, expired, unbounded or unreadable",
  flags: {
    ...ROOT_FLAG,
    ...JSON_FLAG,
    fix: {
      type: "boolean",
      description:
        "re-sign unhealthy daemon creds (same keys, same signing key; no network) and tighten loose modes",
    },
  },
  async run({ values }) {
    const root = await resolveExistingRoot(values.root);
    const fix = values.fix === true;
    const rows = await doctorAuth(root, undefined, { fix });
    const store = await doctorStore(workspaceSecretStore(root), { fix });
    printResult(
      denoIo(),
      { json: values.json === true },
      { creds: rows, store },
      (r) =>
        [
          credRows(r.creds) || "no creds stored",
          "",
          ...(r.store.length
            ? ["store:", storeRows(r.store)]
            : ["store: files and modes as they should be"]),
          ...(fix && !r.creds.some((c) => c.fix) && r.store.length === 0 ? ["nothing to fix"] : []),
        ].join("\n"),
    );
    // Anything still wrong after the run (fixed or not) makes a non-zero exit.
    const badCred = rows.some((r) => isFailingCred(r.status) && !(fix && r.fix?.ok));
    const badStore = store.some((p) => !p.fixed);
    return badCred || badStore ? 1 : 0;
  },
});

registry.register([doctorAuthCommand]);
