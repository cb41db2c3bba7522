/**
 * `cotal dead-letters` on a terminal: one line per record, each made safe on its own. Red team
 * 10 found every record joined on one line with literal `\x0a` between them; the fields come
 * from what members sent (a message id, a subject), so an escape or a newline inside one must
 * stay visible and never start a line of its own.
 */
import assert from "node:assert/strict";
import { setAsideText } from "../../lib/mesh/commands/delivery.ts";

Deno.test("dead-letters - one line per record; a newline or escape inside a field stays visible and inert", () => {
  const at = Date.UTC(2026, 11, 4);
  const text = setAsideText({
    deadLetters: [{
      at,
      stage: "fanout",
      stream: "CHAT_x",
      seq: 7,
      subject: "cotal.x.chat.local.mallory.general",
      msgId: "evil\n2026-12-04T00:00:00.000Z reader DLV_x #1 FAKE\x1b[2J",
      bytes: 70_000,
      reason: "too large once framed",
    }],
    gaps: [],
    told: [],
    trimmed: [{
      at,
      stream: "DM_x",
      recipient: "local.alice",
      sender: "local.c1",
      what: "DM",
      purged: 12,
      bytes: 737_280,
      trims: 2,
    }, {
      at,
      stream: "TASK_x",
      recipient: "r0",
      sender: "local.c2",
      what: "task",
      purged: 3,
      bytes: 184_320,
      trims: 1,
    }],
  });
  const lines = text.split("\n");
  assert.equal(lines.length, 3, text);
  // deno-lint-ignore no-control-regex -- the point: no raw control character reaches the terminal
  assert.equal(/[\x00-\x08\x0b-\x1f\x7f]/.test(text), false, "no raw control character");
  assert.match(
    lines[0],
    /fanout CHAT_x #7 .*evil\\x0a2026.*FAKE\\x1b\[2J .*too large once framed$/,
  );
  assert.match(
    lines[1],
    /^12 unread DMs to local\.alice from local\.c1 were trimmed from DM_x \(737280 bytes\) \(2 trims/,
  );
  assert.match(lines[2], /^3 unread tasks to role r0 from local\.c2 were trimmed from TASK_x/);
  assert.equal(
    setAsideText({ deadLetters: [], gaps: [], told: [], trimmed: [] }),
    "nothing set aside",
  );
});
