// Placeholder so the library links before the public API lands.
namespace fusejit { const char* version_string() { return "0.1.0"; } }
