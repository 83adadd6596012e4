"""GitHub side of docdelta.

`port` (the Protocol and its value types), `pygithub` (the one implementation and the
only importer of PyGithub), `actions` (outputs, job summary, annotations), `comment`
(the sticky comment body), `events` (webhook payloads) and `links` (URLs the comment
links to). Nothing is re-exported here, so importing the package never pulls in PyGithub.
"""
