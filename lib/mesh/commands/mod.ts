/**
 * Every `cotal` verb of the operator's wing: importing this module registers them all in the
 * shared registry (`cotal mcp` lives in lib/mcp and is registered on its own).
 *
 * @module
 */
import "./up.ts";
import "./space.ts";
import "./signer.ts";
import "./mint.ts";
import "./ops.ts";
import "./systemd.ts";
import "./doctor.ts";
import "./agents.ts";
import "./delivery.ts";
import "./logs.ts";
