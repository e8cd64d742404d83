export default defineEffect(42, async () => {});
