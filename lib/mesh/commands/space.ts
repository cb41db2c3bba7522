/**
 * `cotal space add|rm|list|backup|restore`: the spaces of a root.
 *
 * @module
 */
import {
  defineCommand,
  denoIo,
  JSON_FLAG,
  liveLine,
  printList,
  printResult,
} from "../../cli/mod.ts";
import { registry } from "../../registry.ts";
import { CotalError } from "../../errors.ts";
import { assertValidSpaceName } from "../names.ts";
import { spaceAdd, spaceList, spaceRm } from "../space.ts";
import { spaceBackup, spaceRestore } from "../backup.ts";
import { cliCommand } from "../daemons.ts";

import { resolveExistingRoot, resolveRoot, ROOT_FLAG } from "./common.ts";

const INTERRUPTS = ["SIGINT", "SIGTERM", "SIGHUP"] as const;

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
    const live = liveLine(denoIo(), { json: values.json === true });
    live(`adding space '${space}': its account, the broker's reload, its streams and daemons`);
    const root = resolveRoot(values.root);
    // Ctrl-C, a closed terminal or a TERM rolls the add back between its steps.
    const interrupted = new AbortController();
    const stop = () => interrupted.abort();
    for (const sig of INTERRUPTS) Deno.addSignalListener(sig, stop);
    const result = await spaceAdd(root, space, {
      signal: interrupted.signal,
      // The root spelled out: the watchdog runs it again from its own directory.
      resume: cliCommand([...Deno.args, ...(values.root ? [] : ["--root", root])]),
    }).finally(() => {
      for (const sig of INTERRUPTS) Deno.removeSignalListener(sig, stop);
      live.done();
    });
    printResult(
      denoIo(),
      { json: values.json === true },
      { space, ...result },
      () =>
        result.completed
          ? `completed space '${space}', which an interrupted add or restore had left without ` +
            `all of its daemons: they run, and the watchdog heals them`
          : result.served === false
          ? `added space '${space}' to ${root}; the stack is not running: the next 'cotal up ` +
            `--root ${root}' serves it, its $SYS creds included`
          : `added space '${space}': agents, messages, tasks and durable delivery work now\n` +
            `not yet: its live-member view (who is connected, on which channels) and removing a ` +
            `member's live connections and the per-cred connection cap, which need the space's $SYS ` +
            `creds; only the system seed mints them, when the broker starts: when convenient, ` +
            `'cotal down --keep-agents', then 'cotal up' (with --detach if it ran detached; ` +
            `agents come back), which re-issues them. 'cotal status' lists them as missing, and ` +
            `exits 1, until then.`,
    );
  },
});

/** `cotal space rm <space>`. */
export const spaceRmCommand = defineCommand({
  kind: "command",
  name: "space rm",
  summary:
    "stop a space's daemons and delete its streams, buckets and account (asks first, or --yes)",
  flags: {
    ...ROOT_FLAG,
    ...JSON_FLAG,
    yes: { type: "boolean", description: "do not ask: remove the space and its messages for good" },
  },
  positionals: SPACE_ARG,
  async run({ values, positionals }) {
    const space = assertValidSpaceName(positionals[0]);
    const root = await resolveExistingRoot(values.root);
    if (values.yes !== true) {
      const what =
        `space '${space}' of ${root}, with every message, member and credential it holds`;
      if (!Deno.stdin.isTerminal() || !Deno.stderr.isTerminal()) {
        throw new CotalError(
          "usage",
          `space rm deletes ${what}, for good; pass --yes to confirm (there is no terminal to ask on).`,
        );
      }
      // prompt() writes its question to stdout; the question belongs on the terminal.
      const answer = prompt(`Remove ${what}? Type the space's name to confirm:`);
      if (answer?.trim() !== space) {
        throw new CotalError("cancelled", `Nothing removed: the answer was not '${space}'.`);
      }
    }
    // Run again as confirmed, if the watchdog has to finish it.
    const result = await spaceRm(
      root,
      space,
      cliCommand([
        ...Deno.args.filter((a) => a !== "--yes"),
        "--yes",
        ...(values.root ? [] : ["--root", root]),
      ]),
    );
    printResult(
      denoIo(),
      { json: values.json === true },
      { space, ...result },
      (r) =>
        `removed space '${space}' (${
          r.removedOnDisk
            ? "the broker was not running: its streams' files were removed from disk"
            : `${r.deletedStreams.length} streams deleted`
        }: its messages, its buckets and their runtime state); ` +
        `stopped ${r.stopped.length} daemon(s), its agents ended with its supervisor`,
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
    const rows = await spaceList(await resolveExistingRoot(values.root));
    printList(
      denoIo(),
      { json: values.json === true },
      rows,
      (s) =>
        `${s.space.padEnd(24)} ${s.account}  ${
          s.daemons.map((d) => `${d.id.split(".")[0]}:${d.state}`).join(" ")
        }`,
      "no spaces yet; 'cotal up' creates the default one",
    );
  },
});

/** `cotal space backup <space> --to <dir>`. */
export const spaceBackupCommand = defineCommand({
  kind: "command",
  name: "space backup",
  summary: "snapshot one space's streams, account and secrets into a new directory",
  flags: {
    ...ROOT_FLAG,
    ...JSON_FLAG,
    to: { type: "string", required: true, value: "dir", description: "a new or empty directory" },
  },
  positionals: SPACE_ARG,
  async run({ values, positionals }) {
    const space = assertValidSpaceName(positionals[0]);
    const live = liveLine(denoIo(), { json: values.json === true });
    const m = await spaceBackup(
      await resolveExistingRoot(values.root),
      space,
      resolveRoot(values.to),
      { onProgress: live },
    ).finally(() => live.done());
    printResult(
      denoIo(),
      { json: values.json === true },
      m,
      (v) =>
        `backed up space '${space}': ${v.streams.length} streams, ${v.secrets.length} secrets -> ${values.to}${
          v.skipped.length
            ? ` (not kept: ${v.skipped.length} runtime buckets, presence and leases, which the daemons rebuild)`
            : ""
        }`,
    );
  },
});

/** `cotal space restore --from <dir>`. */
export const spaceRestoreCommand = defineCommand({
  kind: "command",
  name: "space restore",
  summary: "restore a backed-up space into this root's running broker",
  flags: {
    ...ROOT_FLAG,
    ...JSON_FLAG,
    from: { type: "string", required: true, value: "dir", description: "a backup directory" },
  },
  async run({ values }) {
    const live = liveLine(denoIo(), { json: values.json === true });
    const m = await spaceRestore(resolveRoot(values.root), resolveRoot(values.from), {
      onProgress: live,
    }).finally(() => live.done());
    printResult(
      denoIo(),
      { json: values.json === true },
      m,
      (v) =>
        [
          `restored space '${v.space}': ${v.streams.length} streams`,
          ...(v.next ?? []).map((n) => `next: ${n}`),
        ].join("\n"),
    );
  },
});

registry.register([
  spaceAddCommand,
  spaceRmCommand,
  spaceListCommand,
  spaceBackupCommand,
  spaceRestoreCommand,
]);
