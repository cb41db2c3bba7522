import { defineCommand, denoIo, JSON_FLAG, printResult } from "../../cli/mod.ts";
import { registry } from "../../registry.ts";
import { assertValidSpaceName } from "../names.ts";
import { spaceAdd, spaceList, spaceRm } from "../space.ts";
import { resolveRoot, ROOT_FLAG } from "./common.ts";

const SPACE_ARG = [{ name: "space", description: "the space's name", required: true }] as const;

/** `cotal space add <space>`. */
export const spaceAddCommand = defineCommand({
  kind: "command",
  name: "space add",
  summary: "add a space to this root's broker without restarting it",
  flags: { ...ROOT_FLAG, ...JSON_FLAG },
  positionals: SPACE_ARG,
  async run({ values, positionals }) {
    const space = assertValidSpaceName(positionals[0]);
    const result = await spaceAdd(resolveRoot(values.root), space);
    printResult(
      denoIo(),
      { json: values.json === true },
      { space, ...result },
      () => `added space '${space}'`,
    );
  },
});

/** `cotal space rm <space>`. */
export const spaceRmCommand = defineCommand({
  kind: "command",
  name: "space rm",
  summary: "stop a space's daemons and delete its streams, buckets and account",
  flags: { ...ROOT_FLAG, ...JSON_FLAG },
  positionals: SPACE_ARG,
  async run({ values, positionals }) {
    const space = assertValidSpaceName(positionals[0]);
    const result = await spaceRm(resolveRoot(values.root), space);
    printResult(
      denoIo(),
      { json: values.json === true },
      { space, ...result },
      (r) => `removed space '${space}' (${r.deletedStreams.length} streams deleted)`,
    );
  },
});

/** `cotal space list`. */
export const spaceListCommand = defineCommand({
  kind: "command",
  name: "space list",
  summary: "list the spaces this root serves",
  flags: { ...ROOT_FLAG, ...JSON_FLAG },
  async run({ values }) {
    const rows = await spaceList(resolveRoot(values.root));
    printResult(
      denoIo(),
      { json: values.json === true },
      rows,
      (r) =>
        r.length
          ? r.map((s) =>
            `${s.space.padEnd(24)} ${s.account}  ${
              s.daemons.map((d) => `${d.id.split(".")[0]}:${d.state}`).join(" ")
            }`
          ).join("\n")
          : "no spaces yet; 'cotal up' creates the default one",
    );
  },
});

registry.register([spaceAddCommand, spaceRmCommand, spaceListCommand]);
