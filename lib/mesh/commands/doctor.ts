import { defineCommand, denoIo, JSON_FLAG, printResult } from "../../cli/mod.ts";
import { registry } from "../../registry.ts";
import { doctorAuth, type DoctorAuthRow } from "../../workspace/doctor.ts";
import { resolveRoot, ROOT_FLAG } from "./common.ts";

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
  return rows.map((r) =>
    `${r.status.padEnd(11)} ${(r.space ?? "").padEnd(16)} ${r.kind.padEnd(26)} ${
      remaining(r.remainingSeconds)
    }${r.detail ? ` (${r.detail})` : ""}${
      r.fix
        ? (r.fix.ok ? " -> re-signed" : ` -> not fixed: ${r.fix.error?.message ?? r.fix.skipped}`)
        : ""
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
      description: "re-sign unhealthy daemon creds (same keys, same signing key; no network)",
    },
  },
  async run({ values }) {
    const rows = await doctorAuth(resolveRoot(values.root), undefined, {
      fix: values.fix === true,
    });
    printResult(
      denoIo(),
      { json: values.json === true },
      rows,
      (r) => credRows(r) || "no creds stored",
    );
    const bad = rows.some((r) => r.status === "expired" || r.status === "unreadable");
    return bad && !values.fix ? 1 : 0;
  },
});

registry.register([doctorAuthCommand]);
