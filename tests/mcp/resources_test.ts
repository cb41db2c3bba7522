/**
 * Channels as MCP resources, judged by the MCP SDK's own client over stdio against a real
 * broker: the joined channels are listed, a channel resource reads as its latest messages, a
 * subscribed channel sends `resources/updated` when a post arrives, a join sends
 * `resources/list_changed`, and an unknown or unjoined URI is refused with a sentence naming
 * the resources there are.
 */
import assert from "node:assert/strict";
import {
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { startDeliverySpace } from "../delivery/_helpers.ts";
import { waitFor } from "../_harness/broker.ts";
import { provision, startMcp } from "./_mcp_agent.ts";

Deno.test("mcp - joined channels are resources: read as history, updated on a post when subscribed, listed anew on a join", async () => {
  await using s = await startDeliverySpace({ prefix: "mcpres" });
  const alice = await startMcp(s, await provision(s, "alice"));
  const bob = await startMcp(s, await provision(s, "bob", undefined, ["general", "ops"]));
  try {
    const updated: string[] = [];
    let listChanged = 0;
    bob.client.setNotificationHandler(
      ResourceUpdatedNotificationSchema,
      (n: { params: { uri: string } }) => {
        updated.push(n.params.uri);
      },
    );
    bob.client.setNotificationHandler(ResourceListChangedNotificationSchema, () => {
      listChanged++;
    });
    const listed = await bob.client.listResources();
    assert.deepEqual(listed.resources.map((r: { uri: string }) => r.uri), [
      "cotal://channel/general",
    ]);

    await alice.call("post", { channel: "general", text: "before the subscription" });
    await bob.client.subscribeResource({ uri: "cotal://channel/general" });
    await alice.call("post", { channel: "general", text: "after it" });
    await waitFor(() => updated.includes("cotal://channel/general"), {
      timeoutMs: 10_000,
      what: "resources/updated for #general",
    });
    const read = await bob.client.readResource({ uri: "cotal://channel/general" });
    const body = JSON.parse(read.contents[0].text as string);
    assert.equal(body.channel, "general");
    assert.deepEqual(
      body.messages.map((m: { text: string }) => m.text).slice(-2),
      ["before the subscription", "after it"],
    );

    // A join changes the list.
    assert.equal((await bob.call("channels", { action: "join", channel: "ops" })).isError, false);
    await waitFor(() => listChanged > 0, { timeoutMs: 10_000, what: "resources/list_changed" });
    assert.deepEqual(
      (await bob.client.listResources()).resources.map((r: { uri: string }) => r.uri).sort(),
      ["cotal://channel/general", "cotal://channel/ops"],
    );

    // Unknown, or not joined: refused with the list of what there is.
    // MCP's "resource not found" (-32002), not an internal error (newcomer pass 8).
    for (const uri of ["cotal://channel/random", "file:///etc/passwd"]) {
      await assert.rejects(
        bob.client.readResource({ uri }),
        (e: { code?: number; message?: string }) => {
          assert.equal(e.code, -32002);
          assert.match(
            String(e.message),
            /There is no resource .*; the resources are the joined channels \(cotal:\/\/channel\/general, cotal:\/\/channel\/ops\)/,
          );
          return true;
        },
      );
    }
    await assert.rejects(
      bob.client.subscribeResource({ uri: "cotal://channel/random" }),
      (e: { code?: number; message?: string }) => {
        assert.equal(e.code, -32002);
        assert.match(String(e.message), /There is no resource/);
        return true;
      },
    );
  } finally {
    await alice.close();
    await bob.close();
  }
});
