/**
 * A root supervisor lifts the host's open-file table cap (`lib/manager/sandbox/file_table.ts`):
 * red team 39 filled 29 % of it from one agent by mapping files (`redteam39_file_table_test.ts`).
 */
import assert from "node:assert/strict";
import { FILE_MAX_UNCAPPED, uncapFileTable } from "../../lib/manager/sandbox/file_table.ts";
import { removeTempDir, tempDir } from "../_harness/broker.ts";

Deno.test("file table - a capped table is lifted to the kernel's maximum, once, and said so", async () => {
  const dir = await tempDir("cotal-filemax-");
  const path = `${dir}/file-max`;
  try {
    await Deno.writeTextFile(path, "2466246\n");
    assert.match(uncapFileTable(path)!, /^lifted fs\.file-max from 2466246 to its maximum/);
    assert.equal((await Deno.readTextFile(path)).trim(), FILE_MAX_UNCAPPED);
    assert.equal(uncapFileTable(path), undefined, "nothing to do the second time");
    await Deno.writeTextFile(path, "junk\n");
    assert.match(uncapFileTable(path)!, /^could not read .*keeps its cap/);
    assert.match(uncapFileTable(`${dir}/absent`)!, /^could not read/);
  } finally {
    await removeTempDir(dir);
  }
});

Deno.test({
  name: "file table - on this host, as root, the supervisor's call leaves fs.file-max uncapped",
  ignore: Deno.uid() !== 0,
  fn() {
    uncapFileTable();
    assert.equal(Deno.readTextFileSync("/proc/sys/fs/file-max").trim(), FILE_MAX_UNCAPPED);
  },
});
