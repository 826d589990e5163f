// Placeholder until the API sources in lib/pending/ are wired in.
namespace fusejit { const char* version_placeholder() { return "0.1.0"; } }
