/**
 * The MCP inbox on disk: a line torn by a kill mid-write is skipped and closed, so the next line
 * is whole and survives the next restart; what was written before is there after a reopen.
 */
import assert from "node:assert/strict";
import { InboxJournal } from "../../lib/mcp/journal.ts";
import { buildMessage } from "../../lib/wire/mod.ts";
import { removeTempDir, tempDir } from "../_harness/broker.ts";

const msg = (text: string) =>
  buildMessage({ space: "j", from: { id: "local.a", name: "a" }, channel: "general", text });

Deno.test("mcp journal - a torn last line is skipped and closed; the next line survives a reopen", async () => {
  const dir = await tempDir("cotal-journal-");
  try {
    const j = await InboxJournal.open(dir);
    assert.equal(await j.append("channel", msg("one")), true);
    assert.equal(await j.append("dm", msg("two")), true);
    // A kill mid-write: half a line, no newline.
    const whole = await Deno.readTextFile(`${dir}/inbox.jsonl`);
    const torn = whole.split("\n")[1].slice(0, 40);
    await Deno.writeTextFile(`${dir}/inbox.jsonl`, whole.split("\n")[0] + "\n" + torn);

    const again = await InboxJournal.open(dir);
    assert.deepEqual(again.unread().map((e) => e.message.parts), [msg("one").parts]);
    assert.equal(await again.append("dm", msg("three")), true);
    const third = await InboxJournal.open(dir);
    assert.deepEqual(
      third.unread().map((e) => (e.message.parts[0] as { text: string }).text),
      ["one", "three"],
    );
  } finally {
    await removeTempDir(dir);
  }
});
