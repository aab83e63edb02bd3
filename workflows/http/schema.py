"""OpenAPI security schemes for the operator credentials the workflow routes accept, so
/api/schema/ says how to authenticate (X-Admin-Key or a staff session cookie)."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class AdminKeyScheme(OpenApiAuthenticationExtension):
    target_class = "ops.auth.AdminKeyAuthentication"
    name = "AdminKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "X-Admin-Key",
            "description": "Operator key with scopes such as workflows:read (manage.py create_api_key).",
        }


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "ops.auth.BearerTokenAuthentication"
    name = "BearerToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "User token (user endpoints)."}
