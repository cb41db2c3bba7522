/**
 * A separate process running one endpoint, so a test can kill it without a clean stop (a
 * crash). Reads its options as JSON on stdin, prints "ready" once started.
 */
import { CotalEndpoint } from "../../lib/endpoint/mod.ts";

const opts = JSON.parse(await new Response(Deno.stdin.readable).text());
const ep = new CotalEndpoint(opts);
await ep.start();
console.log("ready");
await new Promise(() => {});
