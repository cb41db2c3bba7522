export async function run(ctx) {
  await ctx.endpoint();
  await new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }));
}
