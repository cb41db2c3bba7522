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

const texts = (j: InboxJournal) =>
  j.unread().map((e) => (e.message.parts[0] as { text: string }).text);

Deno.test("mcp journal - read marks are appended lines: the last whole one counts after a reopen, a torn one is ignored, an older inbox's read.json is read", async () => {
  const dir = await tempDir("cotal-journal-");
  try {
    const j = await InboxJournal.open(dir);
    for (const t of ["a", "b", "c", "d"]) await j.append("channel", msg(t));
    await j.markRead(j.unread(1));
    const textOf = (e: { message: { parts: unknown[] } }) =>
      (e.message.parts[0] as { text: string }).text;
    await j.markRead(j.unread().filter((e) => textOf(e) === "c"));
    assert.deepEqual(texts(await InboxJournal.open(dir)), ["b", "d"]);
    // A kill mid-write of a marks line: the line before it still counts.
    await Deno.writeTextFile(`${dir}/read.log`, '{"cursor":4,"ext', { append: true });
    const reopened = await InboxJournal.open(dir);
    assert.deepEqual(texts(reopened), ["b", "d"]);
    // And the next mark after it is whole.
    await reopened.markRead(reopened.unread(1));
    assert.deepEqual(texts(await InboxJournal.open(dir)), ["d"]);

    // An inbox from before the log: its read.json is read.
    const old = await tempDir("cotal-journal-old-");
    try {
      const o = await InboxJournal.open(old);
      for (const t of ["x", "y"]) await o.append("dm", msg(t));
      await Deno.remove(`${old}/read.log`).catch(() => {});
      await Deno.writeTextFile(`${old}/read.json`, JSON.stringify({ cursor: 1, extra: [] }));
      assert.deepEqual(texts(await InboxJournal.open(old)), ["y"]);
    } finally {
      await removeTempDir(old);
    }
  } finally {
    await removeTempDir(dir);
  }
});

Deno.test("mcp journal - the marks log is rewritten as its last line once it grows past its bound", async () => {
  const dir = await tempDir("cotal-journal-");
  try {
    const j = await InboxJournal.open(dir);
    // Out-of-order reads keep extra numbers in each line, so lines grow; 600 of them pass 64 KiB.
    for (let i = 0; i < 1200; i++) await j.append("channel", msg(`m${i}`));
    const all = j.unread();
    let marked = 0;
    for (let i = all.length - 1; i > 600; i -= 1, marked++) await j.markRead([all[i]]);
    const size = (await Deno.stat(`${dir}/read.log`)).size;
    assert.ok(size <= 64 * 1024 + 8 * 1024, `read.log is ${size} bytes`);
    assert.equal(texts(await InboxJournal.open(dir)).length, all.length - marked);
  } finally {
    await removeTempDir(dir);
  }
});

Deno.test("mcp journal - the senders of a read id outlive the compaction and 10,000 later arrivals (red team 31)", async () => {
  const dir = await tempDir("cotal-journal-");
  try {
    const j = await InboxJournal.open(dir);
    const from = (id: string, text: string, extra: Record<string, unknown> = {}) => ({
      ...buildMessage({ space: "j", from: { id, name: id }, channel: "general", text }),
      ...extra,
    });
    const post = from("local.alice", "the post");
    await j.append("channel", post);
    await j.markRead(j.unread());
    // Padding read past the 1 MiB compaction, then enough arrivals to push it out of memory.
    for (let i = 0; i < 20; i++) await j.append("dm", from("local.evil", "x".repeat(60 * 1024)));
    await j.markRead(j.unread());
    assert.deepEqual(j.findAll(post.id), [], "the post left the inbox file");
    for (let i = 0; i < 10_050; i++) await j.append("dm", from("local.evil", "."));
    await j.append("dm", from("local.evil", "decoy", { id: post.id }));
    assert.deepEqual(j.sendersOf(post.id).sort(), ["local.alice", "local.evil"]);
    // And after a restart, from what the file still holds.
    const again = await InboxJournal.open(dir);
    assert.ok(again.sendersOf(post.id).includes("local.evil"));
  } finally {
    await removeTempDir(dir);
  }
});
