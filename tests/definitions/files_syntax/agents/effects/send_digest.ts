export default defineEffect({});
