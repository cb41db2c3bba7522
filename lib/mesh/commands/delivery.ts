/**
 * `cotal dead-letters`: what a space's delivery daemon could not deliver. Dead letters (a copy
 * no retry can store, with where it came from and why, never its body), the gaps members are
 * still owed a marker for, what members were told they missed, and what the storage warden
 * trimmed from DM and TASK; asked of the daemon on its admin rail with a short-lived
 * `control-caller` cred minted from this root's signer.
 *
 * @module
 */
import { brokerNotRunning } from "../stack.ts";
import { defineCommand, denoIo, JSON_FLAG, printResult } from "../../cli/mod.ts";
import { safeText } from "../../safe_text.ts";
import type { DeadLetter, Gap, ToldGap, TrimRecord } from "../../delivery/mod.ts";
import { registry } from "../../registry.ts";
import { assertValidSpaceName } from "../names.ts";
import { deliveryAdmin } from "../ops.ts";
import { runningBroker } from "../space.ts";
import { resolveMeshRoot, ROOT_FLAG } from "./common.ts";

function line(d: DeadLetter): string {
  return `${new Date(d.at).toISOString()} ${d.stage} ${d.stream} #${d.seq}${
    d.member ? ` for ${d.member}` : ""
  } ${d.msgId ?? ""} (${d.bytes} bytes): ${d.reason}`;
}

function toldLine(t: ToldGap): string {
  if (t.from) {
    return `${t.member} (${t.lifecycleUid}) was told ${t.count} unread DMs of ${t.from} were ` +
      `trimmed (${t.markers} gap marker${t.markers === 1 ? "" : "s"}, the last ${
        new Date(t.at).toISOString()
      })`;
  }
  return `${t.member} (${t.lifecycleUid}) was told it missed ${t.count} copies ` +
    `(${t.markers} gap marker${t.markers === 1 ? "" : "s"}, the last ${
      new Date(t.at).toISOString()
    }, up to #${t.last.seq} in ${t.last.channel}); it can read them from channel history`;
}

function trimLine(t: TrimRecord): string {
  const to = t.what === "task" ? `tasks to role ${t.recipient}` : `DMs to ${t.recipient}`;
  return `${t.purged} unread ${to} from ${t.sender ?? "several senders"} were trimmed from ` +
    `${t.stream}${t.bytes === undefined ? "" : ` (${t.bytes} bytes)`} (${t.trims} trim${
      t.trims === 1 ? "" : "s"
    }, the last ${new Date(t.at).toISOString()}): the oldest of one of the largest senders ` +
    `while the stream was over half full`;
}

function gapLine(g: Gap): string {
  if (g.from) {
    return `${g.member} (${g.lifecycleUid}) is owed a gap marker: ${g.count} DMs of ${g.from} ` +
      `were trimmed`;
  }
  return `${g.member} (${g.lifecycleUid}) is owed a gap marker: ${g.count} copies missed, ` +
    `#${g.first.seq} in ${g.first.channel} to #${g.last.seq} in ${g.last.channel}`;
}

/** What `setAside` answers. */
export interface SetAsideListing {
  deadLetters: DeadLetter[];
  gaps: Gap[];
  told?: ToldGap[];
  trimmed?: TrimRecord[];
}

/**
 * The listing for a terminal: one line per record, each made safe on its own (a newline or an
 * escape inside a field, which members' messages can put there, stays visible and inert).
 */
export function setAsideText(v: SetAsideListing): string {
  const lines = [
    ...v.deadLetters.map(line),
    ...v.gaps.map(gapLine),
    ...(v.told ?? []).map(toldLine),
    ...(v.trimmed ?? []).map(trimLine),
  ];
  return lines.length ? lines.map((l) => safeText(l)).join("\n") : "nothing set aside";
}

/** `cotal dead-letters`: the delivery daemon's set-aside records for one space. */
export const deadLettersCommand = defineCommand({
  kind: "command",
  name: "dead-letters",
  summary:
    "list what the delivery daemon could not deliver (dead letters, members' gaps, trimmed backlogs)",
  flags: {
    ...ROOT_FLAG,
    ...JSON_FLAG,
    space: { type: "string", default: "default", description: "the space" },
  },
  async run({ values }) {
    const space = assertValidSpaceName(values.space);
    const root = await resolveMeshRoot(values.root, space);
    const url = (await runningBroker(root))?.url;
    if (!url) {
      throw await brokerNotRunning(root);
    }
    const r = await deliveryAdmin(root, space, url, "setAside") as SetAsideListing;
    printResult(denoIo(), { json: values.json === true }, r, setAsideText);
  },
});

registry.register([deadLettersCommand]);
