"""Images VMs may name by id in the simulated ARM: managed images, gallery image definitions
and versions, shared or community gallery images, known once registered (`register_image`,
POST /_sim/images, or a PUT of a Microsoft.Compute/images resource). Marketplace images are
vm_rules.py's.
"""

from __future__ import annotations

from typing import Any

from werkzeug.wrappers import Response

from wmsim.azure.arm_state import ArmState
from wmsim.azure.errors import ArmError, not_found, required_location
from wmsim.azure.resources import IMAGE_TYPE, _json, _key, as_object
from wmsim.azure.vm_rules import check_marketplace_image


class Images(ArmState):
    _images: dict[str, dict[str, Any]]  # lower-case id -> model

    def register_image(self, image_id: str, location: str = "eastus") -> None:
        """An image VMs may name by id: a managed image, a gallery image definition or
        version, a shared or community gallery image id."""
        with self._lock:
            self._images[_key(image_id.rstrip("/"))] = _image_model(image_id, location, {})

    def _put_image(self, rid: str) -> Response:
        body = self._body()
        location = required_location(body)
        existed = _key(rid) in self._images
        model = _image_model(rid, location, dict(body.get("tags") or {}))
        self._images[_key(rid)] = model
        return self._accepted(model, 200 if existed else 201, rid, location)

    def _get_image(self, rid: str) -> Response:
        model = self._images.get(_key(rid))
        if model is None:
            raise not_found(rid)
        return _json(model)

    def _check_image(self, location: str, image: Any) -> None:
        """The image a VM body names exists: by id, registered; else in the marketplace."""
        image = as_object(image)
        by_id = (
            image.get("id")
            or image.get("sharedGalleryImageId")
            or image.get("communityGalleryImageId")
        )
        if by_id:
            if self._image_known(str(by_id)):
                return
            if "galleries/" in str(by_id).lower():
                raise ArmError(
                    404,
                    "GalleryImageNotFound",
                    f"The gallery image {by_id} is not available in {location} region. Please "
                    "contact image owner to replicate to this region, or change your requested "
                    "region.",
                    target="imageReference",
                )
            raise ArmError(
                404,
                "NotFound",
                f"The Image '{by_id}' cannot be found in '{location}' region.",
                target="imageReference",
            )
        check_marketplace_image(image)

    def _image_known(self, image_id: str) -> bool:
        key = _key(image_id.rstrip("/"))
        if key in self._images:
            return True
        # A gallery image definition (its latest version), or a version of a definition.
        definition = key.rsplit("/versions/", 1)[0]
        return any(
            known == definition or known.startswith(definition + "/versions/")
            for known in self._images
        )


def _image_model(image_id: str, location: str, tags: dict[str, str]) -> dict[str, Any]:
    return {
        "id": image_id,
        "name": image_id.rstrip("/").rsplit("/", 1)[1],
        "type": IMAGE_TYPE,
        "location": location,
        "tags": tags,
        "properties": {"provisioningState": "Succeeded"},
    }
