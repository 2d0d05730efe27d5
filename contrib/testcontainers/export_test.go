package walapplytc

// ServerArgs exposes serverArgs to the external tests.
var ServerArgs = serverArgs
