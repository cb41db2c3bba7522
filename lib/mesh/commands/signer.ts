/**
 * `cotal signer audit`: the signer's audit trail of every signing decision.
 *
 * @module
 */
import { defineCommand, denoIo, JSON_FLAG, printList } from "../../cli/mod.ts";
import { safeText } from "../../safe_text.ts";
import { CotalError } from "../../errors.ts";
import { registry } from "../../registry.ts";
import { readAudit, signerAuditPath } from "../../signer/mod.ts";
import { assertValidSpaceName } from "../names.ts";
import { resolveMeshRoot, ROOT_FLAG } from "./common.ts";

/** `cotal signer audit`: what the space's signer signed and refused, oldest first. */
export const signerAuditCommand = defineCommand({
  kind: "command",
  name: "signer audit",
  summary: "what the space's cotal-signer signed and refused, and for whom",
  flags: {
    ...ROOT_FLAG,
    ...JSON_FLAG,
    space: { type: "string", default: "default", description: "the space" },
    refused: { type: "boolean", description: "only the refusals" },
    last: { type: "string", value: "n", description: "only the newest n entries" },
  },
  async run({ values }) {
    const space = assertValidSpaceName(String(values.space ?? "default"));
    // Found by its space, as ps and send find theirs: another root of this machine is no
    // ambiguity for a command that names its space.
    const root = await resolveMeshRoot(values.root, space);
    const all = await readAudit(signerAuditPath(root, space));
    let rows = all;
    if (values.refused === true) rows = rows.filter((e) => e.decision === "refused");
    if (values.last !== undefined) {
      const n = Number(values.last);
      if (!Number.isSafeInteger(n) || n <= 0) {
        throw new CotalError(
          "usage",
          `--last takes a positive whole number; ${
            JSON.stringify(String(values.last))
          } is not one.`,
        );
      }
      rows = rows.slice(-n);
    }
    printList(
      denoIo(),
      { json: values.json === true },
      rows,
      (e) =>
        safeText(
          [
            String(e.at),
            e.decision.padEnd(7),
            `${e.caller}${e.unproven ? " (unproven)" : ""}${
              e.via === "cli" ? " (cotal mint)" : ""
            }`,
            e.notWritten
              ? `${e.notWritten} more ${e.code} not written`
              : `${e.profile ?? "?"} ${e.subject ?? ""}${e.principal ? ` for ${e.principal}` : ""}${
                e.ttlSeconds !== undefined ? ` ttl ${e.ttlSeconds}s` : ""
              }${e.code ? ` (${e.code})` : ""}`,
          ].join(" "),
        ),
      all.length && values.refused === true
        ? `no refusals among the ${all.length} signer decisions recorded for space '${space}'`
        : `no signer decisions recorded for space '${space}' yet`,
    );
  },
});

registry.register([signerAuditCommand]);
