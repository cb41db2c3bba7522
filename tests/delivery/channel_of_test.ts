/** Which channel a chat subscription covers, as the membership view lists it. */
import assert from "node:assert/strict";
import { channelOf } from "../../lib/delivery/feed_rows.ts";

const P = "cotal.s.chat.";

Deno.test("membership view - every form of a chat subscription names its channel; nothing else does", () => {
  assert.equal(channelOf(`${P}*.*.general`, P), "general");
  // Narrower forms a grant also covers (red team 21 hid behind them).
  assert.equal(channelOf(`${P}local.*.general`, P), "general");
  assert.equal(channelOf(`${P}local.bob.general`, P), "general");
  assert.equal(channelOf(`${P}*.*.team.>`, P), "team.>");
  assert.equal(channelOf(`${P}>`, P), ">");
  assert.equal(channelOf(`${P}local.>`, P), ">");
  // Not a chat subscription, or not a channel under it.
  assert.equal(channelOf("cotal.s.dm.local.bob", P), undefined);
  assert.equal(channelOf("_INBOX_x.chat.*.*.general", P), undefined);
  assert.equal(channelOf(`${P}local`, P), undefined);
  assert.equal(channelOf(`${P}bad-owner!.*.general`, P), undefined);
});
