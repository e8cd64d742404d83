// duet's node code host, loaded first (`node --import register.mjs host.mjs`): registers the
// module loader hooks (hooks.mjs) that give node the project as duet-js reads it.
import { register } from "node:module";

register("./hooks.mjs", import.meta.url);
