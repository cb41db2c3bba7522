/**
 * What the relay attacks share: an agent module that joins and stays present (so its relay and
 * creds stay live), and where a spawned agent's launch file is.
 */

/** An agent module that starts its endpoint and stays until stopped. */
export const PRESENT_AGENT = `
export async function run(ctx) {
  await ctx.endpoint();
  await new Promise((r) => ctx.signal.addEventListener("abort", r, { once: true }));
}
`;

/** The launch file of the agent named `name` (its dir starts with the name) under `root`. */
export async function launchOf(root: string, name: string): Promise<string> {
  for await (const space of Deno.readDir(`${root}/agents`)) {
    for await (const e of Deno.readDir(`${root}/agents/${space.name}`)) {
      if (e.isDirectory && e.name.startsWith(name)) {
        return `${root}/agents/${space.name}/${e.name}/launch.json`;
      }
    }
  }
  throw new Error(`no launch file for ${name} under ${root}/agents`);
}
