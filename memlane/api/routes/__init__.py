"""The HTTP API's routes, a module per resource, each an APIRouter that the app includes in
the order of the OpenAPI document."""
