/**
 * `cotal persona list` and `cotal persona show`: the personas of a root, as `spawn` uses them.
 *
 * @module
 */
import { defineCommand, denoIo, JSON_FLAG, printList, printResult } from "../../cli/mod.ts";
import { safeText } from "../../safe_text.ts";
import { CotalError, isCotalError } from "../../errors.ts";
import { findConnector } from "../../manager/mod.ts";
import { registry } from "../../registry.ts";
import { assertValidSpaceName } from "../names.ts";
import { listPersonas, readPersona } from "../persona.ts";
import { resolveMeshRoot, TARGET_FLAGS } from "./common.ts";

/** `arg` as one shell word: bare when it holds nothing a shell would split or expand. */
function shellWord(arg: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", `'\\''`)}'`;
}

/** `cotal persona list`: the personas of a root. */
export const personaListCommand = defineCommand({
  kind: "command",
  name: "persona list",
  summary: "list the personas of this root (<root>/personas/<name>.md)",
  flags: { ...TARGET_FLAGS, ...JSON_FLAG },
  async run({ values }) {
    const root = await resolveMeshRoot(values.root, assertValidSpaceName(values.space));
    const invalid: { name: string; error: string }[] = [];
    const rows = await listPersonas(
      root,
      (name, err) => invalid.push({ name, error: err.message }),
    );
    // A persona naming a connector nobody registered reads well here and fails only at spawn
    // (newcomer pass 11): said as a persona that cannot be used.
    for (const p of rows) {
      try {
        findConnector(p.agent);
      } catch (err) {
        if (!isCotalError(err, "unknown_connector")) throw err;
        invalid.push({ name: p.name, error: `persona ${p.name} (${p.file}): ${err.message}` });
      }
    }
    // A bad file is named (and fails the command) without hiding the good ones.
    for (const bad of invalid) console.error(safeText(`cotal: ${bad.error}`));
    printList(
      denoIo(),
      { json: values.json === true },
      rows,
      (p) =>
        safeText(
          `${p.name.padEnd(20)} ${p.agent.padEnd(12)} ${(p.role ?? "-").padEnd(12)} ${
            p.description ?? ""
          }`,
        ),
      invalid.length
        ? "no persona could be read"
        : `no personas yet; create ${root}/personas/ and write one there as <name>.md`,
    );
    if (invalid.length) {
      throw new CotalError(
        "persona_invalid",
        `${invalid.length} persona file(s) could not be read or name no known connector (named above); fix or remove them.`,
      );
    }
  },
});

/** `cotal persona show <name>`: one persona, as spawn would use it. */
export const personaShowCommand = defineCommand({
  kind: "command",
  name: "persona show",
  summary: "show one persona as spawn would use it",
  flags: { ...TARGET_FLAGS, ...JSON_FLAG },
  positionals: [{ name: "name", description: "the persona", required: true }],
  async run({ values, positionals }) {
    const root = await resolveMeshRoot(values.root, assertValidSpaceName(values.space));
    const p = await readPersona(root, positionals[0]);
    printResult(denoIo(), { json: values.json === true }, p, (v) =>
      [
        safeText(`persona ${v.name} (${v.file})`),
        safeText(`agent: ${v.agent}`),
        safeText(`description: ${v.description ?? "-"}`),
        safeText(`role: ${v.role ?? "-"}`),
        safeText(`channels: ${v.channels.join(", ") || "-"}`),
        safeText(`model: ${v.model ?? "-"}`),
        safeText(`env: ${v.env.join(", ") || "-"}`),
        safeText(`may spawn: ${v.spawn.join(", ") || "-"}`),
        // Quoted as a shell would take it: `sh -c 'tr a-z A-Z'` is three arguments, not five.
        safeText(`command: ${v.command ? [v.command, ...v.args].map(shellWord).join(" ") : "-"}`),
        "",
        safeText(v.instructions || "(no instructions)", { lines: true }),
      ].join("\n"));
  },
});

registry.register([personaListCommand, personaShowCommand]);
