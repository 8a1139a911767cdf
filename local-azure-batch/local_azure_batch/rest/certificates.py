"""Certificates, a retired feature: every certificate operation is answered with the service's own error.

Recorded (``azure-sdk-assets`` ``test_batch_certificates``): ``POST /certificates`` is answered 400
``CertificateRetired`` with the message and ``Reason`` below. The other certificate operations of the REST
reference (list, get, delete, cancel deletion) are answered the same way, as the ``Reason`` says ("For
Certificate APIs, they are no longer supported"): a documented guess, no answer to them is recorded.
"""

from __future__ import annotations

from aiohttp import web

from local_azure_batch.model.errors import BatchServiceError
from local_azure_batch.model.service import BatchService

from .routing import RouteTable

routes = RouteTable()
CERTIFICATES = "/certificates"
CERTIFICATE = "/certificates(*)"
RETIRED_MESSAGE = "The 'Azure Batch Certificates' feature was retired on 02/29/2024."
RETIRED_REASON = (
    "The operation is blocked because the 'Azure Batch Certificates' feature was retired on 02/29/2024. For "
    "Certificate APIs, they are no longer supported. For Pool, Job, and Job Schedule APIs, the target resource "
    "should no longer contain certificate references, please either remove the certificate references or delete "
    "the resource."
)


def certificate_retired() -> BatchServiceError:
    return BatchServiceError(400, "CertificateRetired", RETIRED_MESSAGE, [("Reason", RETIRED_REASON)])


@routes.add("POST", CERTIFICATES, "Certificates_CreateCertificate")
@routes.add("GET", CERTIFICATES, "Certificates_ListCertificates")
@routes.add("GET", CERTIFICATE, "Certificates_GetCertificate")
@routes.add("DELETE", CERTIFICATE, "Certificates_DeleteCertificate")
@routes.add("POST", CERTIFICATE + "/canceldelete", "Certificates_CancelCertificateDeletion")
async def retired(request: web.Request, service: BatchService, params: dict[str, str]) -> web.Response:
    raise certificate_retired()
