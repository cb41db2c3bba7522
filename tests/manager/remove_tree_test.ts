import assert from "node:assert/strict";
import { removeTree } from "../../lib/manager/remove_tree.ts";

/** A chain of `levels` directories under `top`, nested past PATH_MAX by renames (red team 26). */
async function deepTree(top: string, levels: number): Promise<void> {
  const CH = 1_000;
  const chain = async (name: string) => {
    let p = `${top}/${name}`;
    await Deno.mkdir(p);
    for (let i = 0; i < CH; i++) await Deno.mkdir(p += "/a");
    return p;
  };
  await chain("t0");
  for (let k = 1, total = CH; total < levels; k++, total += CH + 1) {
    const bottom = await chain(`t${k}`);
    await Deno.rename(`${top}/t${k - 1}`, `${bottom}/x`);
  }
}

Deno.test("remove tree - a tree deeper than PATH_MAX is removed, its links unlinked, never followed", async () => {
  const base = await Deno.makeTempDir({ prefix: "cotal-rmtree-" });
  try {
    const outside = `${base}/outside`;
    await Deno.mkdir(outside);
    await Deno.writeTextFile(`${outside}/keep`, "the host's file");
    const dir = `${base}/agent`;
    await Deno.mkdir(`${dir}/home`, { recursive: true });
    await deepTree(`${dir}/home`, 6_000);
    await Deno.symlink(outside, `${dir}/home/to-outside`);
    await Deno.symlink(`${outside}/keep`, `${dir}/home/t5/keep-link`);
    await new Deno.Command("mkfifo", { args: [`${dir}/home/fifo`] }).output();
    assert.equal(await removeTree(dir, Date.now() + 120_000), undefined);
    await assert.rejects(Deno.lstat(dir), Deno.errors.NotFound);
    assert.equal(await Deno.readTextFile(`${outside}/keep`), "the host's file");
    // Nothing was left beside it either.
    assert.deepEqual((await Array.fromAsync(Deno.readDir(base))).map((e) => e.name), ["outside"]);
  } finally {
    await new Deno.Command("rm", { args: ["-rf", base] }).output();
  }
});

Deno.test("remove tree - a deadline already past stops it, saying so; a missing dir is no failure", async () => {
  const base = await Deno.makeTempDir({ prefix: "cotal-rmtree-" });
  try {
    await Deno.mkdir(`${base}/a/b`, { recursive: true });
    assert.equal(await removeTree(`${base}/a`, Date.now() - 1), "timed out");
    assert.ok((await Deno.lstat(`${base}/a/b`)).isDirectory);
    assert.equal(await removeTree(`${base}/nothing-here`, Date.now() + 10_000), undefined);
  } finally {
    await Deno.remove(base, { recursive: true });
  }
});
